package search

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The placement objective (closed-form critical path) tracks the
// event-driven schedule that the final prediction uses: within 1% on
// uniform pipelines, within 15% on random heterogeneous ones (the closed
// form charges every stage's fill and drain in full, so it errs high when
// few micro-batches meet very uneven stages).
func TestPlacementObjectiveTracksSimulation(t *testing.T) {
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	cfgs := []parallel.Config{
		{TP: 2, PP: 4, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, SequenceParallel: true, Recompute: parallel.RecomputeFull},
		{TP: 1, PP: 8, DP: 4, CP: 1, VPP: 1, MicroBatch: 2, GlobalBatch: 64, Recompute: parallel.RecomputeSelective, DistributedOptimizer: true},
		{TP: 4, PP: 4, DP: 2, CP: 1, VPP: 2, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true, Recompute: parallel.RecomputeFull},
		{TP: 8, PP: 2, DP: 2, CP: 1, VPP: 5, MicroBatch: 1, GlobalBatch: 64, SequenceParallel: true, Recompute: parallel.RecomputeNone},
	}
	worst := 0.0
	for seed := uint64(1); seed <= 4; seed++ {
		for _, uniformCluster := range []bool{true, false} {
			c := randomCluster(4, 8, seed)
			if uniformCluster {
				c = dgxA100(4)
			}
			for _, cfg := range cfgs {
				cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
				e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
				pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
				order := []int{0, 1, 2, 3}
				bh := make([]int, e.nBlocks)
				pl.blocks(order, bh)
				sim := e.predict(bh).IterationSeconds
				obj := pl.cost(order) - e.memoryPenalty(bh) // the simulation does not price memory
				rel := math.Abs(obj-sim) / sim
				worst = math.Max(worst, rel)
				tol := 0.15
				if uniformCluster {
					tol = 0.01
				}
				if rel > tol {
					t.Errorf("seed %d uniform=%v %+v: objective %g vs simulated %g (%.1f%%)", seed, uniformCluster, cfg, obj, sim, 100*rel)
				}
			}
		}
	}
	t.Logf("worst relative gap %.2f%%", 100*worst)
}
