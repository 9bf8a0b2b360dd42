package search

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The timeline is the prediction drawn: its iteration time must be the
// plan's, each rank runs m*v forwards and backwards without overlap, and
// every op that waits on another stage has the transfer it waited for.
func TestPlanTimelineMatchesPrediction(t *testing.T) {
	cases := []struct {
		name string
		c    *cluster.Cluster
		m    model.Model
		o    Options
	}{
		{"two-islands", twoIslands(), llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, TopK: 4, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}},
		{"interleaved", twoIslands(), llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, TopK: 2, Seed: 1, Fixed: parallel.Constraints{PP: 4, VPP: 2, ZeroStage: -1}}},
		{"recompute-full", twoIslands(), llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, TopK: 1, Seed: 1, Fixed: parallel.Constraints{PP: 2, Recompute: parallel.RecomputeFull, ZeroStage: -1}}},
		{"deepspeed-zero2", twoIslands(), llama2_13b, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 64, TopK: 1, Seed: 1, Fixed: parallel.Constraints{ZeroStage: 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(tc.c, tc.m, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range res.Plans {
				p := &res.Plans[i]
				tl, err := PlanTimeline(tc.c, tc.m, p)
				if err != nil {
					t.Fatal(err)
				}
				checkTimeline(t, p, tl)
			}
		})
	}
}

func checkTimeline(t *testing.T, p *Plan, tl *Timeline) {
	t.Helper()
	if !approx(tl.IterationSeconds, p.Predicted.IterationSeconds, 1e-9) {
		t.Errorf("%+v: timeline iteration %g s, prediction %g s", p.Config, tl.IterationSeconds, p.Predicted.IterationSeconds)
	}
	if tl.Stages != p.PP || len(tl.Reduce) != p.PP || len(tl.Hosts) != p.PP {
		t.Fatalf("stages %d, reduce %d, hosts %d; PP %d", tl.Stages, len(tl.Reduce), len(tl.Hosts), p.PP)
	}
	fwd := make([]int, p.PP)
	bwd := make([]int, p.PP)
	lastEnd := make([]float64, p.PP)
	recompute := 0.0
	for _, op := range tl.Ops {
		if op.Start < lastEnd[op.Rank]-1e-12 {
			t.Errorf("rank %d: op at %g starts before the previous ends at %g", op.Rank, op.Start, lastEnd[op.Rank])
		}
		lastEnd[op.Rank] = op.End
		if op.Backward {
			bwd[op.Rank]++
			recompute += op.Recompute
			if op.Recompute < 0 || op.Recompute >= op.End-op.Start {
				t.Errorf("recompute %g of a %g s backward", op.Recompute, op.End-op.Start)
			}
		} else {
			fwd[op.Rank]++
		}
	}
	want := tl.MicroBatches * max(p.VPP, 1)
	for r := range fwd {
		if fwd[r] != want || bwd[r] != want {
			t.Errorf("rank %d: %d forwards, %d backwards; want %d each", r, fwd[r], bwd[r], want)
		}
	}
	if (p.Recompute == parallel.RecomputeNone) != (recompute == 0) {
		t.Errorf("recompute %s but %g s of recomputation drawn", p.Recompute, recompute)
	}
	// Every op but rank 0's chunk-0 forwards and the last virtual stage's
	// backwards receives a transfer.
	wantT := 2*want*p.PP - 2*tl.MicroBatches
	if p.PP == 1 && max(p.VPP, 1) == 1 {
		wantT = 0
	}
	if len(tl.Transfers) != wantT {
		t.Errorf("%d transfers, want %d", len(tl.Transfers), wantT)
	}
	for _, x := range tl.Transfers {
		if x.End < x.Start || math.IsNaN(x.Start) {
			t.Errorf("transfer %+v", x)
		}
	}
	if tl.Optimizer.Start < tl.Makespan-1e-12 || tl.Offload.Start != tl.Optimizer.End {
		t.Errorf("optimizer %+v, offload %+v after makespan %g", tl.Optimizer, tl.Offload, tl.Makespan)
	}
}
