package search

import (
	"math/rand/v2"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The work bound never exceeds the cost, or the simulated iteration, of
// any placement: checked on random orders of heterogeneous clusters
// (including slow A10 hosts) and on the rebalanced splits the search
// tries, which the bound must also cover.
func TestWorkBoundIsALowerBound(t *testing.T) {
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	cfgs := []parallel.Config{
		{TP: 2, PP: 4, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, SequenceParallel: true, Recompute: parallel.RecomputeFull},
		{TP: 1, PP: 2, DP: 16, CP: 1, VPP: 2, MicroBatch: 2, GlobalBatch: 128, Recompute: parallel.RecomputeSelective, DistributedOptimizer: true},
		{TP: 2, PP: 2, DP: 4, CP: 2, VPP: 1, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true},
	}
	tight := false
	for seed := uint64(1); seed <= 5; seed++ {
		c := randomCluster(4, 8, seed)
		rng := rand.New(rand.NewPCG(seed, 11))
		for _, cfg := range cfgs {
			cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
			e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
			lb := e.workBound()
			pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
			for k := 0; k < 10; k++ {
				order := rng.Perm(4)
				cost := pl.cost(order)
				bh := make([]int, e.nBlocks)
				pl.blocks(order, bh)
				pred := e.predict(bh).IterationSeconds
				if lb > cost*(1+1e-9) || lb > pred*(1+1e-9) {
					t.Fatalf("seed %d cfg %+v order %v: bound %g above cost %g / prediction %g", seed, cfg, order, lb, cost, pred)
				}
				if split := rebalance(e, pl, order); split != nil {
					cfg2 := cfg
					cfg2.StageLayers = split
					e2 := newPlanEval(c, m, cfg2, parallel.FrameworkMegatron)
					if c2 := newPlacer(e2, pl.sym, pl.starts).cost(order); lb > c2*(1+1e-9) {
						t.Fatalf("seed %d: bound %g above the rebalanced split's cost %g", seed, lb, c2)
					}
				}
				if lb > 0.5*cost {
					tight = true
				}
			}
		}
	}
	if !tight {
		t.Error("the bound is never within 2x of a placement's cost: too loose to prune")
	}
}
