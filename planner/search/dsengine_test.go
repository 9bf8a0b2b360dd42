package search

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// DeepSpeed's pipeline engine partitions each activation (and gradient) it
// sends between stages over the TP group: v0.14.4's runtime/config.py
// defaults pipeline.pipe_partitioned and grad_partitioned to true, and
// runtime/pipe/engine.py sends one PartitionedTensor part per TP rank and
// rebuilds the whole with an all-gather on receipt. Megatron-Core sends the
// whole tensor from every TP rank. Two stages of TP8 on two hosts: the
// DeepSpeed send is an eighth of Megatron's on the same link, and the
// receiving stage pays the all-gather over its host's link.
func TestDeepSpeedPipeSendsPartitioned(t *testing.T) {
	c := testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 100}}, 0)
	m := model.Model{Name: "gpt-8l", NumLayers: 8, Hidden: 4096, Heads: 32, SeqLength: 2048, Vocab: 51200}
	cfg := parallel.Config{TP: 8, PP: 2, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 16, NumMicroBatches: 16,
		Recompute: parallel.RecomputeFull, Precision: gpu.PrecisionBF16, StageLayers: evenLayers(8, 2)}
	bh := []int{0, 1} // stage 0 on host 0, stage 1 on host 1
	var send, total [2]float64
	for i, f := range []parallel.Framework{parallel.FrameworkMegatron, parallel.FrameworkDeepSpeed} {
		e := newPlanEval(c, m, cfg, f)
		send[i] = e.sendOf(nil, bh, 0, 1, 0, 0)
		var w stageWork
		e.stage(bh, 1, 0, make([]int, 1), &w, nil)
		total[i] = w.total
	}
	if r := send[0] / send[1]; r < 7 || r > 8.01 {
		t.Errorf("stage send: Megatron %.3g s, DeepSpeed %.3g s: %.2fx, want about TP = 8x", send[0], send[1], r)
	}
	gather := AllGatherSeconds(P2PBytes(m, cfg), cfg.TP, c.LinkBetween(1, 1))
	if d := total[1] - total[0]; gather <= 0 || math.Abs(d-gather) > 1e-9 {
		t.Errorf("last stage's work: DeepSpeed %.6g s - Megatron %.6g s = %.3g s, want the activation's all-gather %.3g s", total[1], total[0], d, gather)
	}
}

// DeepSpeed without ZeRO reduces gradients once backward is done (v0.14.4
// runtime/engine.py: backward calls allreduce_gradients, which runs
// buffered_allreduce_fallback at the accumulation boundary; the pipeline
// engine's ReduceGrads follows its last backward), so none of the reduction
// hides behind backward; Megatron's DDP leaves only its last bucket.
func TestDeepSpeedZeRO0ReducesAfterBackward(t *testing.T) {
	cfg := parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 8, Precision: gpu.PrecisionBF16}
	allReduce := func(bytes float64) float64 { return bytes / 10e9 }
	params := 1e9
	for _, tc := range []struct {
		f        parallel.Framework
		wantTail float64 // share of the total exposed after backward
	}{
		{parallel.FrameworkDeepSpeed, 1},
		{parallel.FrameworkMegatron, dpBucketParams / params},
	} {
		total, tail, _ := dpCommSeconds(cfg, tc.f, params, allReduce)
		if got := tail / total; math.Abs(got-tc.wantTail) > 1e-9 {
			t.Errorf("%s ZeRO 0: %.3g of %.3g s after backward (%.3f), want %.3f", tc.f, tail, total, got, tc.wantTail)
		}
		if exp := exposedDP(total, tail, 10*total); math.Abs(exp-tail) > 1e-12 {
			t.Errorf("%s: exposed %.3g s behind a long backward, want the tail %.3g s", tc.f, exp, tail)
		}
	}
}
