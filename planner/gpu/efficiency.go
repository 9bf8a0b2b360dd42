package gpu

import (
	"math"
	"strings"
)

// Latency model.
//
// Compute is priced per GEMM with a roofline: time = max(flops/(peak*eff),
// bytes/HBM) where eff falls off for small matrix dimensions:
//
//	eff(m,n,k) = max * r(m) * r(n) * r(k),  r(x) = 1/(1+(ramp/x)^pow)
//
// with max and ramp fitted per GPU generation (computeCurves) to published
// end-to-end training throughput (testdata/published; docs/cost-model.md
// gives every constant's source and calibration_test.go the fit's error).
// max is below what an isolated cuBLAS GEMM reaches (~0.8 of dense peak on
// A100 and H100): whole steps lose more to kernel gaps and launch overheads.
// Small hidden sizes and micro-batches fall lower because r() and the
// memory-bound element-wise work dominate.
// bytesPerElem: bf16 activations, weights and gradients on the wire.
const BytesPerElem = 2.0

// GEMMLaunchS is what every GEMM kernel costs beyond its roofline time:
// launch and the last partial wave of thread blocks (a few microseconds
// on A100/H100; not fitted, it only matters for tiny GEMMs, which the
// published tables do not contain).
const GEMMLaunchS = 4e-6

// Curve is one GPU generation's fitted compute efficiency.
type Curve struct {
	// GEMMMax is the fraction of the 16-bit dense peak a large GEMM reaches
	// inside a training step; GEMMRamp the dimension at which one factor
	// r(x) = x/(x+ramp) is 1/2.
	GEMMMax, GEMMRamp float64
	// GEMMRampPow sharpens the ramp: r(x) = 1/(1+(ramp/x)^pow).
	GEMMRampPow float64
	// FP8Max is the same for FP8 GEMMs, as a fraction of the FP8 peak
	// (Transformer Engine's scaling and casts included).
	FP8Max float64
	// AttnMax is flash attention's fraction of the 16-bit peak at large
	// head dimension; AttnHeadRamp its head-dimension ramp.
	AttnMax, AttnHeadRamp float64
	// ElemScale multiplies the element-wise HBM traffic (how much of it the
	// framework's kernels fuse away).
	ElemScale float64
}

// Curves are fitted by TestFitComputeCurves (PIPETTE_FIT=1) to the
// published tables of that generation: Ampere to Narayanan et al. 2021
// Table 1 and Korthikanti et al. 2022 Table 4 (A100), Hopper to NeMo 24.07
// (H100 FP8) and llm-foundry (H100 BF16). Other GPUs use the curve of the
// nearest generation (docs/cost-model.md).
var Curves = map[string]Curve{
	"ampere": {GEMMMax: 0.747, GEMMRamp: 109, GEMMRampPow: 2.14, FP8Max: 0.70, AttnMax: 0.70, AttnHeadRamp: 32, ElemScale: 2.58},
	"hopper": {GEMMMax: 0.602, GEMMRamp: 333, GEMMRampPow: 1, FP8Max: 0.741, AttnMax: 0.446, AttnHeadRamp: 30.5, ElemScale: 1.52},
}

// FP32GEMMMax is the fraction of the fp32 peak an fp32 GEMM reaches, per
// kind of fp32 unit (fp32Kind), flat in shape: measured kernels, not fitted
// to the published tables.
//   - "hopper" (TF32 tensor cores): Aceso's per-op fp32 profiles of OPT-30B
//     on GH200 (eth-easl/sailor at cf2c8e3, Aceso/profiler/GH-96/
//     profiled-data-fp32, TP 1, micro-batch 1-8: 257-316 TFLOP/s for every
//     linear GEMM, where the 16-bit curve's ramp priced them at 240-275 and
//     GPT-Neo-2.7B's, hidden 2560, at 215); fitted by TestFitFP32GEMMMax,
//     checked on GPT-Neo-2.7B and OPT-350M (TestFP32GEMMsMatchProfiles).
//   - "cuda-core" (a GPU without TF32: Volta, Turing, CDNA2): the same
//     profiles on V100-16GB, OPT-30B at micro-batch 1 and 2 (larger ones ran
//     out of memory); checked on GPT-Neo-2.7B, OPT-350M and on TITAN RTX.
//     The 16-bit ramp priced V100's linear GEMMs 7-27% too slow.
//   - "cuda-core attention": unfused attention's batched GEMMs (QK^T, AV:
//     the head dimension, 64-128, on one side) on such a GPU, fitted on the
//     same V100 profiles' two batched ops; flat too (CUDA-core SGEMM has no
//     tensor-core tile for a thin side to leave idle), where the 16-bit ramp
//     priced them 3-4x too slow.
//
// The 16-bit ramp stays for 16-bit GEMMs: it was fitted to whole bf16/FP8
// steps. A kind without an entry (TF32 on Ampere) prices fp32 GEMMs with
// its generation's 16-bit max and ramp.
var FP32GEMMMax = map[string]float64{"hopper": 0.576, "cuda-core": 0.905, "cuda-core attention": 0.79}

// fp32Kind is the key of FP32GEMMMax for g: "cuda-core" on a GPU whose fp32
// rate is not a TF32 rate, else its generation.
func fp32Kind(g Spec) string {
	if !TF32(g) {
		return "cuda-core"
	}
	return Arch(g)
}

// LinearGEMMCurve is the curve a linear layer's GEMM of precision p is
// priced with on g: for fp32 where FP32GEMMMax has g's kind, that max
// without the shape ramp; otherwise cv.
func LinearGEMMCurve(g Spec, cv Curve, p Precision) Curve {
	if p != PrecisionFP32 {
		return cv
	}
	if m, ok := FP32GEMMMax[fp32Kind(g)]; ok {
		cv.GEMMMax, cv.GEMMRamp = m, 0
	}
	return cv
}

// BatchedGEMMCurve is the curve attention's batched GEMMs (QK^T and AV,
// the head dimension on one side) of precision p are priced with on g:
// in fp32 where FP32GEMMMax has an attention entry for g's kind, that max
// without the shape ramp; otherwise cv.
func BatchedGEMMCurve(g Spec, cv Curve, p Precision) Curve {
	if p != PrecisionFP32 {
		return cv
	}
	if m, ok := FP32GEMMMax[fp32Kind(g)+" attention"]; ok {
		cv.GEMMMax, cv.GEMMRamp = m, 0
	}
	return cv
}

// Arch is the generation (key of Curves) whose curve prices g: Hopper and Blackwell
// data-centre parts (and MI300X, a peer of H100 in achieved efficiency)
// use "hopper", everything else "ampere".
func Arch(g Spec) string {
	n := compactGPUName(g.Model)
	for _, k := range []string{"h100", "h200", "gh200", "b200", "gb200", "gb300", "b300", "mi300", "mi325", "mi355"} {
		if strings.Contains(n, k) {
			return "hopper"
		}
	}
	return "ampere"
}

func CurveOf(g Spec) Curve { return Curves[Arch(g)] }

const (
	defaultPeakTFLOPS = 100.0
	defaultHBMTBPerS  = 1.0
)

func PeakFLOPS(g Spec) float64 {
	if g.PeakTFLOPS > 0 {
		return g.PeakTFLOPS * 1e12
	}
	return defaultPeakTFLOPS * 1e12
}

// GEMMPeakFLOPS is the tensor-core rate GEMMs of precision p run at on g,
// times the measured/calibrated scale, and the curve's ceiling for it: FP8
// GEMMs use the FP8 rate (a GPU without one runs them at its 16-bit rate;
// enumerate never offers fp8 there).
func GEMMPeakFLOPS(g Spec, cv Curve, p Precision) float64 {
	if p == PrecisionFP8 && g.PeakFP8TFLOPS > 0 {
		return g.PeakFP8TFLOPS * 1e12 * scaleOr1(g.ComputeScaleFP8) * cv.FP8Max
	}
	if p == PrecisionFP32 {
		return fp32PeakFLOPS(g) * scaleOr1(g.ComputeScale16) * cv.GEMMMax
	}
	return PeakFLOPS(g) * scaleOr1(g.ComputeScale16) * cv.GEMMMax
}

// fp32PeakFLOPS is g's fp32 GEMM rate (TF32 tensor cores where it has
// them); without one, a quarter of the 16-bit rate (no GPU in the catalog
// is faster; the search refuses fp32 plans on such GPUs before pricing).
func fp32PeakFLOPS(g Spec) float64 {
	if g.PeakFP32TFLOPS > 0 {
		return g.PeakFP32TFLOPS * 1e12
	}
	return PeakFLOPS(g) / 4
}

// TF32 reports whether g's fp32 rate is a TF32 tensor-core rate. Ampere
// and later (and CDNA3) run TF32 at half their dense 16-bit rate; Volta's,
// Turing's and CDNA2's fp32 rates are a quarter of it or less, and so is a
// cluster file's plain-FP32 peak_fp32_tflops, given for a job that leaves
// TF32 off.
func TF32(g Spec) bool {
	return g.PeakFP32TFLOPS > 0 && g.PeakFP32TFLOPS >= 0.4*g.PeakTFLOPS
}

func scaleOr1(x float64) float64 {
	if x > 0 {
		return x
	}
	return 1
}

// AttnPeakFLOPS is flash attention's rate: it runs in 16-bit even in FP8
// training (Megatron's TE attention is bf16 unless --fp8-dot-product-
// attention is set).
func AttnPeakFLOPS(g Spec, cv Curve) float64 {
	return PeakFLOPS(g) * scaleOr1(g.ComputeScale16) * cv.AttnMax
}

func HBMBytesPerS(g Spec) float64 {
	if g.MemoryBandwidthTBPerS > 0 {
		return g.MemoryBandwidthTBPerS * 1e12
	}
	return defaultHBMTBPerS * 1e12
}

func (cv Curve) Ramp(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return 1 / (1 + math.Pow(cv.GEMMRamp/x, cv.GEMMRampPow))
}

// ShapeEfficiency is the ramp part of a GEMM's efficiency (1 for large).
func (cv Curve) ShapeEfficiency(m, n, k float64) float64 {
	return cv.Ramp(m) * cv.Ramp(n) * cv.Ramp(k)
}

// GEMMEfficiency is the fraction of the 16-bit peak a bf16 GEMM of m x k
// times k x n reaches on g inside a training step when compute bound.
func GEMMEfficiency(g Spec, m, n, k float64) float64 {
	cv := CurveOf(g)
	return cv.GEMMMax * cv.ShapeEfficiency(m, n, k)
}

// GEMMSeconds is the roofline time of one m x k times k x n bf16 GEMM.
func GEMMSeconds(g Spec, m, n, k float64) float64 {
	return CurveGEMMSeconds(g, CurveOf(g), PrecisionBF16, m, n, k)
}

// GEMMKernelTFLOPS is the model's rate (TFLOP/s) of one GEMM of precision p
// on g without the measured/calibrated scale, priced as a linear layer's
// GEMM is (LinearGEMMCurve): what a GEMM benchmark on the host is compared
// with to derive that scale.
func GEMMKernelTFLOPS(g Spec, p Precision, m, n, k float64) float64 {
	g.ComputeScale16, g.ComputeScaleFP8 = 0, 0
	s := CurveGEMMSeconds(g, LinearGEMMCurve(g, CurveOf(g), p), p, m, n, k)
	if s <= 0 {
		return 0
	}
	return 2 * m * n * k / s / 1e12
}

func CurveGEMMSeconds(g Spec, cv Curve, p Precision, m, n, k float64) float64 {
	if m <= 0 || n <= 0 || k <= 0 {
		return 0
	}
	flops := 2 * m * n * k
	compute := flops / (GEMMPeakFLOPS(g, cv, p) * cv.ShapeEfficiency(m, n, k))
	elem := ElemBytes(p)
	if p == PrecisionFP8 {
		elem = 1
	}
	memory := elem * (m*k + k*n + m*n) / HBMBytesPerS(g)
	return max(compute, memory) + GEMMLaunchS
}

// ModelGEMMTFLOPS is the cost model's compute-bound rate of one isolated
// GEMM on g (what a measured sample is compared with).
func ModelGEMMTFLOPS(g Spec, m, n, k float64) float64 {
	return PeakFLOPS(g) * GEMMEfficiency(g, m, n, k) / 1e12
}
