package search

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// twoIslandMatrix is n hosts of 8 GPUs in two islands (A100 and H100),
// listed shuffled; links inside an island vary at 60-100% of the island's
// rate (100-400 Gbit/s), links between islands 1-25 Gbit/s: a Pipette-like
// measured matrix.
func twoIslandMatrix(n int, seed uint64) *cluster.Cluster {
	rng := rand.New(rand.NewPCG(seed, 3))
	gpus := []gpu.Spec{gpuA100, gpuH100}
	var isl []cluster.Island
	rate := make([]float64, 2)
	for i := range rate {
		isl = append(isl, cluster.Island{Spec: cluster.IslandSpec{Name: fmt.Sprintf("i%d", i), GPUsPerHost: 8, GPU: gpus[i]}, RDMA: true})
		rate[i] = 100 + 300*rng.Float64()
	}
	hosts := make([]cluster.Host, n)
	perm := rng.Perm(n)
	for i := range hosts {
		k := perm[i] % 2
		hosts[i] = cluster.Host{HostEntry: cluster.HostEntry{Name: fmt.Sprintf("n%02d", i)}, Island: k, GPUs: 8, GPU: gpus[k],
			IntraBytesPerS: 300e9, NICBytesPerS: rate[k] / 8 * 1e9, MemoryBytes: 1 << 40}
		isl[k].Hosts = append(isl[k].Hosts, i)
	}
	bw, lat := make([][]float64, n), make([][]float64, n)
	for a := range bw {
		bw[a], lat[a] = make([]float64, n), make([]float64, n)
	}
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			g, l := 1+24*rng.Float64(), 50e-6
			if hosts[a].Island == hosts[b].Island {
				g, l = rate[hosts[a].Island]*(0.6+0.4*rng.Float64()), 5e-6
			}
			bw[a][b], bw[b][a] = g/8*1e9, g/8*1e9
			lat[a][b], lat[b][a] = l, l
		}
	}
	return cluster.NewCluster(isl, hosts, bw, lat)
}

// bestStagePerm is the lowest cost over every order of order's stage rows.
func bestStagePerm(p *PlacementProblem, order []int, pp int) float64 {
	k := len(order) / pp
	best := p.Cost(order)
	o := make([]int, 0, len(order))
	permutations(pp, func(perm []int) {
		o = o[:0]
		for _, r := range perm {
			o = append(o, order[r*k:(r+1)*k]...)
		}
		best = min(best, p.Cost(o))
	})
	return best
}

// On 16 hosts with untied embeddings (no first-last stage coupling) the
// host-by-host local search stops at stage orders that a reordering of
// whole stages beats (issue 12 saw 0.4%); stageExact finds the best order
// of the stages' host sets.
func TestPlacementReordersWholeStages(t *testing.T) {
	m := gpt3_175b
	m.UntieEmbeddings = true
	for _, tc := range []struct {
		seed    uint64
		pp, dp  int
		minMiss float64 // what the search without stage moves leaves
	}{
		{seed: 3, pp: 4, dp: 4, minMiss: 0.004},
		{seed: 27, pp: 8, dp: 2, minMiss: 0.008},
	} {
		c := twoIslandMatrix(16, tc.seed)
		cfg := parallel.Config{TP: 8, PP: tc.pp, DP: tc.dp, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64 * tc.dp,
			SequenceParallel: true, Recompute: parallel.RecomputeFull, DistributedOptimizer: true}
		place := func(stageMoves bool) (*PlacementProblem, []int, float64) {
			p, err := NewPlacementProblem(c, m, cfg, parallel.FrameworkMegatron)
			if err != nil {
				t.Fatal(err)
			}
			p.pl.noStageMoves = !stageMoves
			order, cost := p.Place(PlaceOptions{Seed: 1})
			return p, order, cost
		}
		p, before, was := place(false)
		reordered := bestStagePerm(p, before, tc.pp)
		if miss := (was - reordered) / was; miss < tc.minMiss {
			t.Fatalf("seed %d PP%d: host moves alone miss %.3f%%, the case wants >= %.1f%%", tc.seed, tc.pp, 100*miss, 100*tc.minMiss)
		}
		p, after, now := place(true)
		if now > reordered*(1+1e-12) {
			t.Fatalf("seed %d PP%d: with stage moves %.4f s, the best stage order of the old placement is %.4f s", tc.seed, tc.pp, now, reordered)
		}
		if again := bestStagePerm(p, after, tc.pp); again < now*(1-1e-12) {
			t.Fatalf("seed %d PP%d: placement %.4f s, but reordering its stages gives %.4f s", tc.seed, tc.pp, now, again)
		}
		t.Logf("seed %d PP%d DP%d: host moves %.4f s, with stage reordering %.4f s (%.2f%% better)", tc.seed, tc.pp, tc.dp, was, now, 100*(was-now)/was)
	}
}

// The placement objective (closed-form critical path) tracks the schedule
// simulator (planEval.predict) that the plan table prints, on the orders
// the search picks and on random ones: 1F1B within 3%, interleaved within
// 3% on placed orders. Before the round-trip term the search exploited the
// objective's blind spot for slow pipeline links (issue 12: 20.9 s
// predicted by the objective, 23.1 s by the simulator, on 64 hosts).
func TestObjectiveTracksSimulator(t *testing.T) {
	m := gpt3_175b
	m.UntieEmbeddings = true
	for _, tc := range []struct{ hosts, pp, dp, vpp int }{{16, 8, 2, 1}, {64, 8, 8, 1}, {16, 4, 4, 1}, {64, 8, 8, 2}} {
		for seed := uint64(1); seed <= 2; seed++ {
			c := twoIslandMatrix(tc.hosts, seed)
			cfg := parallel.Config{TP: 8, PP: tc.pp, DP: tc.dp, CP: 1, VPP: tc.vpp, MicroBatch: 1, GlobalBatch: 64 * tc.dp,
				SequenceParallel: true, Recompute: parallel.RecomputeFull, DistributedOptimizer: true}
			p, err := NewPlacementProblem(c, m, cfg, parallel.FrameworkMegatron)
			if err != nil {
				t.Fatal(err)
			}
			order, _ := p.Place(PlaceOptions{Seed: 1})
			orders := [][]int{order}
			if tc.vpp == 1 {
				rng := rand.New(rand.NewPCG(seed, 1))
				for range 5 {
					orders = append(orders, rng.Perm(tc.hosts))
				}
			}
			for i, o := range orders {
				sim, err := p.Simulate(o)
				if err != nil {
					t.Fatal(err)
				}
				s, cost := sim.Predicted.IterationSeconds, p.Cost(o)
				if d := (cost - s) / s; math.Abs(d) > 0.03 {
					t.Errorf("%d hosts PP%d DP%d VPP%d seed %d order %d: objective %.3f s, simulator %.3f s (%+.1f%%)",
						tc.hosts, tc.pp, tc.dp, tc.vpp, seed, i, cost, s, 100*d)
				}
			}
		}
	}
}
