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
