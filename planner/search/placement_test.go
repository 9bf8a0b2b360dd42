package search

import (
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// permutations calls f with every order of 0..n-1.
func permutations(n int, f func([]int)) {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	var rec func(k int)
	rec = func(k int) {
		if k == n {
			f(a)
			return
		}
		for i := k; i < n; i++ {
			a[k], a[i] = a[i], a[k]
			rec(k + 1)
			a[k], a[i] = a[i], a[k]
		}
	}
	rec(0)
}

// The placement is exact on small clusters: for random heterogeneous
// bandwidth matrices (and slower GPUs on some hosts) on up to 8 hosts, its
// cost equals the minimum over every host permutation.
func TestPlacementMatchesBruteForce(t *testing.T) {
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	cases := []struct {
		hosts, gpus int
		cfg         parallel.Config
	}{
		{4, 4, parallel.Config{TP: 4, PP: 4, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 16, SequenceParallel: true, Recompute: parallel.RecomputeFull}},
		{6, 2, parallel.Config{TP: 1, PP: 4, DP: 3, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 24, Recompute: parallel.RecomputeFull}},
		{7, 2, parallel.Config{TP: 2, PP: 7, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 14, SequenceParallel: true, Recompute: parallel.RecomputeSelective, StageLayers: []int{6, 6, 6, 6, 6, 5, 5}}},
		{8, 2, parallel.Config{TP: 1, PP: 4, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, Recompute: parallel.RecomputeFull, DistributedOptimizer: true}},
		{8, 4, parallel.Config{TP: 2, PP: 8, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true, Recompute: parallel.RecomputeFull}},
		{8, 8, parallel.Config{TP: 8, PP: 4, DP: 2, CP: 1, VPP: 2, MicroBatch: 1, GlobalBatch: 16, SequenceParallel: true, Recompute: parallel.RecomputeFull}},
	}
	for seed := uint64(1); seed <= 3; seed++ {
		for _, tc := range cases {
			c := randomCluster(tc.hosts, tc.gpus, seed)
			cfg := tc.cfg
			cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
			e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
			pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
			_, got := pl.placeOrder(PlaceOptions{Seed: 1})
			want := -1.0
			permutations(tc.hosts, func(order []int) {
				if c := pl.cost(order); want < 0 || c < want {
					want = c
				}
			})
			if !approx(got, want, 1e-12) {
				t.Errorf("seed %d, %d hosts, %+v: placement %g, brute force %g", seed, tc.hosts, cfg, got, want)
			}
		}
	}
}

// Islands: two fast islands joined by a slow link. The placement keeps DP
// groups inside islands and puts the single pipeline boundary on the slow
// link, and beats the naive interleaved host order.
func TestPlacementKeepsDPInsideIslands(t *testing.T) {
	c := testCluster([]islandDef{
		{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
		{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
	}, 10)
	// Interleave the file order so that naive placement mixes islands.
	perm := []int{0, 4, 2, 3, 1, 5, 6, 7}
	c = permuteHosts(c, perm)
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	cfg := parallel.Config{TP: 8, PP: 2, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 16, SequenceParallel: true, Recompute: parallel.RecomputeFull}
	e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
	pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
	order, best := pl.placeOrder(PlaceOptions{Seed: 3})
	for s := 0; s < 2; s++ {
		isl := c.Hosts[order[4*s]].Island
		for k := 1; k < 4; k++ {
			if c.Hosts[order[4*s+k]].Island != isl {
				t.Fatalf("stage %d spans islands: order %v", s, order)
			}
		}
	}
	naive := pl.cost([]int{0, 1, 2, 3, 4, 5, 6, 7})
	if best >= naive/2 {
		t.Fatalf("placed %g s vs naive %g s: expected a clear win", best, naive)
	}
}

func permuteHosts(c *cluster.Cluster, perm []int) *cluster.Cluster {
	n := len(perm)
	cbw, clat := c.Matrices()
	hosts := make([]cluster.Host, n)
	bw := make([][]float64, n)
	lat := make([][]float64, n)
	for i := range perm {
		hosts[i] = c.Hosts[perm[i]]
		bw[i] = make([]float64, n)
		lat[i] = make([]float64, n)
		for j := range perm {
			bw[i][j], lat[i][j] = cbw[perm[i]][perm[j]], clat[perm[i]][perm[j]]
		}
	}
	return cluster.NewCluster(c.Islands, hosts, bw, lat)
}

// Same seed, same placement; the time budget is honoured.
func TestPlacementDeterministicAndBudgeted(t *testing.T) {
	c := randomCluster(24, 8, 9)
	m := gpt3_175b
	cfg := parallel.Config{TP: 8, PP: 8, DP: 3, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 48, NumMicroBatches: 16, SequenceParallel: true, Recompute: parallel.RecomputeFull}
	run := func(seed int64, budget time.Duration) ([]int, float64, time.Duration) {
		e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
		pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
		start := time.Now()
		o, v := pl.placeOrder(PlaceOptions{Seed: seed, Budget: budget})
		return o, v, time.Since(start)
	}
	a, ca, _ := run(5, 0)
	b, cb, _ := run(5, 0)
	if ca != cb || len(a) != len(b) {
		t.Fatalf("same seed gave %g and %g", ca, cb)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed gave orders %v and %v", a, b)
		}
	}
	if _, _, d := run(5, time.Millisecond); d > 200*time.Millisecond {
		t.Fatalf("1 ms budget took %v", d)
	}
	// The result is a permutation: every host exactly once.
	seen := map[int]bool{}
	for _, h := range a {
		if seen[h] || h < 0 || h >= len(c.Hosts) {
			t.Fatalf("order %v is not a permutation", a)
		}
		seen[h] = true
	}
}

// Placing must not disturb the shared start orders: a second call with the
// same seed gives the same cost.
func TestPlacementRepeatable(t *testing.T) {
	c := randomCluster(20, 8, 11)
	cfg := parallel.Config{TP: 8, PP: 4, DP: 5, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 40, NumMicroBatches: 8, SequenceParallel: true, Recompute: parallel.RecomputeFull}
	p, err := NewPlacementProblem(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	if err != nil {
		t.Fatal(err)
	}
	_, a := p.Place(PlaceOptions{Seed: 2})
	_, b := p.Place(PlaceOptions{Seed: 2})
	if a != b {
		t.Fatalf("second placement %g differs from first %g", b, a)
	}
}
