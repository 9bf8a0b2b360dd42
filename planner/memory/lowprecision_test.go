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

// In FP8 Transformer Engine's linears keep their FP8-quantized inputs (1 B)
// and the output projection an FP8 copy of the attention output beside the
// bf16 one flash attention keeps (linearInputBytes). Llama 3 8B's layer
// (h 4096, 32 heads, 8 groups, SwiGLU f 14336, flash attention, dropout
// off) at TP1, s 8192, b 1, by hand, bytes per token:
//
//	bf16: norms' inputs 2*2h + QKV and FC1 inputs 2*2h = 32,768;
//	      mixed QKV 2*(4096+2*1024) = 12,288, query copy 8,192, attention
//	      output 8,192, SwiGLU FC1 output 2*2f + FC2 input 2f = 86,016:
//	      147,456 -> x 8192 tokens = 1,207,959,552
//	fp8:  2*2h + 2*1h = 24,576; 12,288 + 8,192 + 8,192 + FP8 copy 4,096
//	      + 2*2f + 1f = 71,680: 129,024 -> 1,056,964,608
func TestFP8KeepsQuantizedLinearInputs(t *testing.T) {
	m := model.Model{NumLayers: 32, Hidden: 4096, FFNHidden: 14336, Heads: 32, QueryGroups: 8, SwiGLU: true,
		SeqLength: 8192, Vocab: 128256}.WithoutDropout()
	for _, c := range []struct {
		precision gpu.Precision
		want      float64
	}{{gpu.PrecisionBF16, 1207959552}, {gpu.PrecisionFP8, 1056964608}} {
		cfg := Normalized(parallel.Config{MicroBatch: 1, Recompute: parallel.RecomputeNone, Precision: c.precision})
		if got := layerActivationBytes(m, cfg); got != c.want {
			t.Errorf("%s: %.0f B per layer, by hand %.0f", c.precision, got, c.want)
		}
	}
}
