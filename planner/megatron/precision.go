package megatron

import (
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Micro-batch and precision choices of the search.

// precisionFromArgs is the precision Megatron-LM runs with these flags:
// --fp8-format (Transformer Engine FP8; priced as hybrid, E4M3/E5M2),
// --fp16, else bf16 (what pretrain scripts pass; fp32 is not planned).
func precisionFromArgs(a Args) gpu.Precision {
	switch {
	case a.Has("--fp8-format"):
		return gpu.PrecisionFP8
	case a.Has("--fp16"):
		return gpu.PrecisionFP16
	}
	return gpu.PrecisionBF16
}
