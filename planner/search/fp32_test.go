package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// fp32 GEMMs run at the TF32 rate (half of A100's bf16 rate), attention is
// unfused, elements are 4 bytes: an A100 GPT step takes well over 1.6x the
// bf16 one, activations double and the model states are 16 B per
// parameter (fp32 weights 4, grads 4, Adam moments 8) instead of 18.
func TestFP32PricedAndSized(t *testing.T) {
	m := model.Model{Name: "gpt-1.3b", NumLayers: 24, Hidden: 2048, Heads: 16, SeqLength: 2048, Vocab: 51200}
	c := testCluster([]islandDef{{hosts: 1, gpus: 8, gpu: gpu.Spec{Model: "A100-SXM4-80GB", MemoryGiB: 80, PeakTFLOPS: 312, MemoryBandwidthTBPerS: 2.039, PeakFP32TFLOPS: 156}, intraGBs: 300, nicGbit: 1600}}, 0)
	f := false
	price := func(p gpu.Precision) *Plan {
		o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 32, TopK: 1, Seed: 1, Fixed: parallel.Constraints{TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1,
			MicroBatch: 1, Recompute: parallel.RecomputeNone, ZeroStage: -1, DistributedOptimizer: &f, SequenceParallel: &f, NoOffload: true, Precision: p}}
		res, err := Search(c, m, o)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		return &res.Plans[0]
	}
	bf, fp := price(gpu.PrecisionBF16), price(gpu.PrecisionFP32)
	if r := fp.Predicted.IterationSeconds / bf.Predicted.IterationSeconds; r < 1.6 {
		t.Errorf("fp32 step %.3f s, bf16 %.3f s: ratio %.2f, want >= 1.6 (TF32 is half the bf16 rate)", fp.Predicted.IterationSeconds, bf.Predicted.IterationSeconds, r)
	}
	cfg := bf.Config
	mb := memory.EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
	cfg.Precision = gpu.PrecisionFP32
	mf := memory.EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
	states := func(b memory.Breakdown) float64 { return b.Weights + b.Gradients + b.Optimizer }
	if r := states(mf) / states(mb); r < 16.0/18-0.01 || r > 16.0/18+0.01 {
		t.Errorf("fp32 model states %.3g B vs bf16 %.3g B: ratio %.3f, want 16/18", states(mf), states(mb), r)
	}
	if mf.Activations < 2*mb.Activations {
		t.Errorf("fp32 activations %.3g B, bf16 %.3g B: want at least twice", mf.Activations, mb.Activations)
	}
}

// A GPU without an fp32 rate cannot get an fp32 plan, and the error says
// how to declare one.
func TestFP32NeedsTheGPUsRate(t *testing.T) {
	g := gpu.Spec{Model: "mystery-accelerator", MemoryGiB: 32, PeakTFLOPS: 200, MemoryBandwidthTBPerS: 1}
	c := testCluster([]islandDef{{hosts: 1, gpus: 4, gpu: g, intraGBs: 100, nicGbit: 100}}, 0)
	_, err := Search(c, tinyModel, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 8, TopK: 1, Fixed: parallel.Constraints{Precision: gpu.PrecisionFP32, ZeroStage: -1}})
	if err == nil || !strings.Contains(err.Error(), "peak_fp32_tflops") || !strings.Contains(err.Error(), "mystery-accelerator") {
		t.Fatalf("fp32 on a GPU without an fp32 rate: err = %v, want one naming the GPU and peak_fp32_tflops", err)
	}
}
