package search

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Incremental re-pricing agrees with the full evaluation after every move
// of a random walk (swaps and reversals, accepted or undone), on
// heterogeneous clusters, for 1F1B and interleaved configs, with memory
// penalties (A10 hosts are too small for some stages).
func TestIncrementalMatchesFull(t *testing.T) {
	cfgs := []parallel.Config{
		{TP: 2, PP: 4, DP: 16, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, SequenceParallel: true, Recompute: parallel.RecomputeFull},
		{TP: 1, PP: 4, DP: 32, CP: 1, VPP: 2, MicroBatch: 1, GlobalBatch: 256, Recompute: parallel.RecomputeSelective, DistributedOptimizer: true},
		{TP: 8, PP: 8, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true},
		// Four blocks a host, two per stage: hosts hold two stages, so a
		// move changes the link counts of pipelines it does not move.
		{TP: 2, PP: 16, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true, Recompute: parallel.RecomputeFull},
	}
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	const hosts = 16
	for seed := uint64(1); seed <= 4; seed++ {
		c := randomCluster(hosts, 8, seed)
		for _, cfg := range cfgs {
			cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
			e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
			pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
			order := identity(hosts)
			inc := newIncEval(e, pl.slots, order)
			if inc == nil {
				t.Fatalf("config %+v not covered", cfg)
			}
			rng := rand.New(rand.NewPCG(seed, 3))
			for step := 0; step < 200; step++ {
				i, j, swap := randomMove(rng, order)
				got := inc.moved(order, i, j, math.Inf(1))
				if want := pl.cost(order); math.Abs(got-want) > 1e-9*want {
					t.Fatalf("seed %d cfg %+v step %d order %v: incremental %g, full %g", seed, cfg, step, order, got, want)
				}
				if rng.IntN(2) == 0 { // undo
					applyMove(order, i, j, swap)
					inc.revert(order)
					got = inc.cost()
					if want := pl.cost(order); math.Abs(got-want) > 1e-9*want {
						t.Fatalf("seed %d step %d undo: incremental %g, full %g", seed, step, got, want)
					}
				}
			}
		}
	}
}

// Hosts with different GPU counts shift every later block when swapped;
// long reversals fall back to a full re-price. Both still agree.
func TestIncrementalMixedHostSizes(t *testing.T) {
	c := testCluster([]islandDef{
		{hosts: 6, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200},
		{hosts: 4, gpus: 4, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
	}, 100)
	cfg := parallel.Config{TP: 2, PP: 4, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 8, SequenceParallel: true, Recompute: parallel.RecomputeSelective}
	e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
	order := identity(10)
	inc := newIncEval(e, pl.slots, order)
	rng := rand.New(rand.NewPCG(5, 5))
	for step := 0; step < 300; step++ {
		i, j, _ := randomMove(rng, order)
		if got, want := inc.moved(order, i, j, math.Inf(1)), pl.cost(order); math.Abs(got-want) > 1e-9*want {
			t.Fatalf("step %d order %v: incremental %g, full %g", step, order, got, want)
		}
	}
}

// With a bound, a move (re-priced incrementally or from scratch) may stop
// early, but only when its cost is at least the bound, and then with a
// figure between the two;
// below the bound it is the cost, and undoing a stopped move restores the
// priced state. The walk stops some moves early (else this checks
// nothing).
func TestIncrementalBound(t *testing.T) {
	cfg := parallel.Config{TP: 2, PP: 4, DP: 16, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 4, SequenceParallel: true, Recompute: parallel.RecomputeFull}
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	const hosts = 16
	stopped := 0
	for seed := uint64(1); seed <= 4; seed++ {
		c := randomCluster(hosts, 8, seed)
		e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
		pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
		order := identity(hosts)
		inc := newIncEval(e, pl.slots, order)
		rng := rand.New(rand.NewPCG(seed, 7))
		for step := 0; step < 200; step++ {
			i, j, swap := randomMove(rng, order)
			want := pl.cost(order)
			bound := want * []float64{0.5, 0.99, 1.01, 2}[rng.IntN(4)]
			got := inc.moved(order, i, j, bound)
			switch {
			case want < bound && math.Abs(got-want) > 1e-9*want:
				t.Fatalf("seed %d step %d: cost %g below bound %g, moved says %g", seed, step, want, bound, got)
			case want >= bound && (got < bound || got > want*(1+1e-9)):
				t.Fatalf("seed %d step %d: cost %g at least bound %g, moved says %g", seed, step, want, bound, got)
			}
			if got < want*(1-1e-9) {
				stopped++
			}
			if got >= bound || rng.IntN(2) == 0 {
				applyMove(order, i, j, swap)
				inc.revert(order)
				if got, want := inc.cost(), pl.cost(order); math.Abs(got-want) > 1e-9*want {
					t.Fatalf("seed %d step %d undo: incremental %g, full %g", seed, step, got, want)
				}
			}
		}
	}
	if stopped == 0 {
		t.Error("no move stopped early")
	}
}

// randomMove draws a move of the placement search (positions i <= j of
// order, a swap or a reversal) and applies it to order.
func randomMove(rng *rand.Rand, order []int) (i, j int, swap bool) {
	i, j = rng.IntN(len(order)), rng.IntN(len(order))
	if i > j {
		i, j = j, i
	}
	swap = rng.IntN(2) == 0
	applyMove(order, i, j, swap)
	return i, j, swap
}
