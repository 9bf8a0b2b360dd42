package memory

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Megatron-LM's train_llama3_8b_h100_fp8.sh flags, priced: with
// --grad-reduce-in-bf16 the gradient buffer is bf16 (2 B/param, not 4), and
// with --fp8-param-gather Transformer Engine keeps no bf16 weight beside
// the FP8 one, so the FP8 weight copies are not added on top of the 2 B
// weights. Nothing else of the breakdown moves.
func TestLowPrecisionDPFlagsShrinkModelStates(t *testing.T) {
	m := model.Model{NumLayers: 4, Hidden: 1024, Heads: 16, SeqLength: 1024, Vocab: 50257}
	base := parallel.Config{TP: 1, PP: 1, DP: 8, MicroBatch: 1, NumMicroBatches: 8, DistributedOptimizer: true, Precision: gpu.PrecisionFP8}
	plain := EstimateStage(m, base, parallel.FrameworkMegatron, 0)
	p := StageParameters(m, Normalized(base), 0)
	copies := fp8WeightCopyBytes(m, base, 0)
	if copies <= 0 || !relClose(plain.Weights, 2*p+copies, 1e-12) || !relClose(plain.Gradients, 4*p, 1e-12) {
		t.Fatalf("without the flags: weights %g (want 2P + FP8 copies %g), grads %g (want 4P); P = %g", plain.Weights, 2*p+copies, plain.Gradients, p)
	}
	for _, tc := range []struct {
		name           string
		flags          parallel.LowPrecisionDP
		weights, grads float64
	}{
		{"--grad-reduce-in-bf16", parallel.LowPrecisionDP{GradReduceBF16: true}, 2*p + copies, 2 * p},
		{"--fp8-param-gather", parallel.LowPrecisionDP{FP8ParamGather: true}, 2 * p, 4 * p},
		{"both", parallel.LowPrecisionDP{FP8ParamGather: true, GradReduceBF16: true}, 2 * p, 2 * p},
	} {
		cfg := base
		cfg.LowPrecisionDP = tc.flags
		got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
		if !relClose(got.Weights, tc.weights, 1e-12) || !relClose(got.Gradients, tc.grads, 1e-12) ||
			!relClose(got.Optimizer, plain.Optimizer, 1e-12) || !relClose(got.Activations, plain.Activations, 1e-12) {
			t.Errorf("%s: %+v; want weights %g, grads %g, optimizer and activations as without it (%+v)", tc.name, got, tc.weights, tc.grads, plain)
		}
	}
}
