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
	// PrecisionFP32 is training without a half-precision flag: fp32
	// weights, gradients and activations, GEMMs on TF32 tensor cores where
	// the GPU has them (Spec.PeakFP32TFLOPS), no flash attention (its
	// kernels take only fp16/bf16), 16 B of model state per parameter.
	PrecisionFP32 Precision = "fp32"
)

// ElemBytes is the size of an activation, weight or gradient element on
// the wire and in HBM in precision p (FP8 GEMM operands aside).
func ElemBytes(p Precision) float64 {
	if p == PrecisionFP32 {
		return 4
	}
	return 2
}
