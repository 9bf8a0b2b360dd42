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

// --use-precision-aware-optimizer (Megatron-LM core_v0.19.0 with TE >= 2.1):
// the distributed optimizer's shard holds a bf16 run's fp32 master as its
// 2-byte remainder (store_param_remainders) and each moment in the dtype
// its flag gives. By hand, per parameter before the DP shard: default
// 4+4+4 = 12; precision-aware bf16 2+4+4 = 10; with bf16 moments 2+2+2 = 6;
// fp8 moments 2+1+1 = 4; fp16 runs keep a full fp32 master 4+4+4 = 12, or
// 2+4+4 with --main-params-dtype fp16; fp32 runs 8 (the weights are the
// masters). --main-grads-dtype bf16 halves the gradient buffer.
func TestPrecisionAwareOptimizerStates(t *testing.T) {
	m := model.Model{NumLayers: 4, Hidden: 1024, Heads: 16, SeqLength: 1024, Vocab: 50257}
	const dp = 8
	p := StageParameters(m, Normalized(parallel.Config{TP: 1, PP: 1, DP: dp}), 0)
	pa := func(o parallel.PrecisionAwareOptimizer) *parallel.PrecisionAwareOptimizer { return &o }
	for _, tc := range []struct {
		name      string
		precision gpu.Precision
		flags     *parallel.PrecisionAwareOptimizer
		optB      float64
		gradB     float64
	}{
		{"default bf16", gpu.PrecisionBF16, nil, 12, 4},
		{"precision-aware bf16", gpu.PrecisionBF16, pa(parallel.PrecisionAwareOptimizer{}), 10, 4},
		{"precision-aware fp8 (delayed scaling)", gpu.PrecisionFP8, pa(parallel.PrecisionAwareOptimizer{}), 10, 4},
		{"bf16 moments", gpu.PrecisionBF16, pa(parallel.PrecisionAwareOptimizer{ExpAvgBytes: 2, ExpAvgSqBytes: 2}), 6, 4},
		{"fp8 moments, bf16 main grads", gpu.PrecisionBF16, pa(parallel.PrecisionAwareOptimizer{ExpAvgBytes: 1, ExpAvgSqBytes: 1, MainGradsBF16: true}), 4, 2},
		{"fp16 run", gpu.PrecisionFP16, pa(parallel.PrecisionAwareOptimizer{}), 12, 4},
		{"fp16 run, fp16 main params", gpu.PrecisionFP16, pa(parallel.PrecisionAwareOptimizer{MainParamsFP16: true}), 10, 4},
		{"fp32 run", gpu.PrecisionFP32, pa(parallel.PrecisionAwareOptimizer{}), 8, 4},
	} {
		cfg := parallel.Config{TP: 1, PP: 1, DP: dp, MicroBatch: 1, NumMicroBatches: 8, DistributedOptimizer: true, Precision: tc.precision}
		cfg.PrecisionAware = tc.flags
		got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
		if !relClose(got.Optimizer, tc.optB*p/dp, 1e-12) || !relClose(got.Gradients, tc.gradB*p, 1e-12) {
			t.Errorf("%s: optimizer %g B, gradients %g B; by hand %g B/param / DP %d = %g, gradients %g B/param = %g",
				tc.name, got.Optimizer, got.Gradients, tc.optB, dp, tc.optB*p/dp, tc.gradB, tc.gradB*p)
		}
	}
}
