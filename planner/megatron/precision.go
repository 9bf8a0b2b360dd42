package megatron

import (
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// precisionFromArgs is the precision Megatron-LM runs with these flags:
// --fp8-format (Transformer Engine FP8; priced as hybrid, E4M3/E5M2),
// --fp16, --bf16, else fp32 (Megatron's default: params_dtype float32).
func precisionFromArgs(a Args) gpu.Precision {
	switch {
	case a.Has("--fp8-format"):
		return gpu.PrecisionFP8
	case a.Has("--fp16"):
		return gpu.PrecisionFP16
	case a.Has("--bf16"):
		return gpu.PrecisionBF16
	}
	return gpu.PrecisionFP32
}
