package gpu

// Precision is the GEMM precision of a training run: bf16 or fp16 mixed
// precision, or fp8 as Transformer Engine runs it in Megatron-LM
// (--fp8-format hybrid: E4M3 forward, E5M2 gradients; attention, norms and
// the optimizer stay in bf16/fp32).
type Precision string

const (
	PrecisionBF16 Precision = "bf16"
	PrecisionFP16 Precision = "fp16"
	PrecisionFP8  Precision = "fp8"
)
