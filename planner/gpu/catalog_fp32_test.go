package gpu

import "testing"

// Every catalog GPU has an fp32 GEMM rate, no faster than its 16-bit one.
func TestCatalogFP32Rates(t *testing.T) {
	for _, e := range gpuCatalog {
		if e.spec.PeakFP32TFLOPS <= 0 || e.spec.PeakFP32TFLOPS > e.spec.PeakTFLOPS {
			t.Errorf("%s: fp32 %g TFLOP/s, 16-bit %g", e.spec.Model, e.spec.PeakFP32TFLOPS, e.spec.PeakTFLOPS)
		}
	}
}

// Issue 22: GH200 and the consumer GPUs users mix into clusters resolve
// from nvidia-smi's names with their datasheet figures.
func TestCatalogConsumerAndGH200(t *testing.T) {
	for _, c := range []struct {
		smi, model      string
		mem, bf16, fp32 float64
	}{
		{"NVIDIA GH200 480GB", "GH200", 95.6, 989, 494.7},
		{"NVIDIA GeForce RTX 4090", "RTX-4090", 24, 165.2, 82.6},
		{"NVIDIA GeForce RTX 3090", "RTX-3090", 24, 71, 35.6},
		{"NVIDIA TITAN RTX", "TITAN-RTX", 24, 130.5, 16.3},
		{"NVIDIA GeForce RTX 2080 Ti", "RTX-2080-Ti", 11, 53.8, 13.4},
	} {
		g, ok := Lookup(c.smi)
		if !ok || g.Model != c.model || g.MemoryGiB != c.mem || g.PeakTFLOPS != c.bf16 || g.PeakFP32TFLOPS != c.fp32 {
			t.Errorf("%q: %+v (found %v), want %s %g GiB %g/%g TFLOP/s", c.smi, g, ok, c.model, c.mem, c.bf16, c.fp32)
		}
	}
}

// TF32 tells a TF32 tensor-core rate from a plain FP32 one, for the catalog
// (Ampere and later, and MI300X, have TF32; Volta, Turing and MI250X do
// not) and for a cluster file that gives the plain rate for a job that
// leaves TF32 off.
func TestTF32(t *testing.T) {
	for _, tc := range []struct {
		gpu  string
		fp32 float64 // a cluster file's peak_fp32_tflops (0: the catalog's)
		want bool
	}{
		{"A100-40GB-SXM", 0, true}, {"H100-SXM", 0, true}, {"GH200", 0, true}, {"B200", 0, true},
		{"L40S", 0, true}, {"RTX-3090", 0, true}, {"RTX-4090", 0, true}, {"MI300X", 0, true},
		{"V100-16GB-SXM2", 0, false}, {"TITAN-RTX", 0, false}, {"RTX-2080-Ti", 0, false}, {"MI250X", 0, false},
		{"A100-40GB-SXM", 19.5, false}, {"H100-SXM", 66.9, false},
	} {
		s, _, ok := Resolve(Spec{Model: tc.gpu, PeakFP32TFLOPS: tc.fp32})
		if !ok {
			t.Fatalf("%s: not in the catalog", tc.gpu)
		}
		if got := TF32(s); got != tc.want {
			t.Errorf("TF32(%s, fp32 %.1f TFLOP/s) = %v, want %v", tc.gpu, s.PeakFP32TFLOPS, got, tc.want)
		}
	}
}
