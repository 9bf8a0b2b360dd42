package gpu

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestLookupGPUNames(t *testing.T) {
	cases := []struct {
		name, want string
		memGiB     float64
	}{
		{"NVIDIA H100 80GB HBM3", "H100-SXM", 79.6},
		{"NVIDIA H100 PCIe", "H100-PCIe", 79.6},
		{"NVIDIA H100 NVL", "H100-NVL", 93.6},
		{"NVIDIA H200", "H200", 140.4},
		{"NVIDIA L40S", "L40S", 45},
		{"NVIDIA L4", "L4", 22.5},
		{"NVIDIA L40", "L40", 45},
		{"NVIDIA GH200 480GB", "GH200", 95.6},
		{"NVIDIA A10", "A10", 22.5},
		{"NVIDIA A10G", "A10", 22.5},
		{"NVIDIA A100-SXM4-80GB", "A100-80GB-SXM", 80},
		{"NVIDIA A100 80GB PCIe", "A100-80GB-PCIe", 80},
		{"NVIDIA A100-PCIE-40GB", "A100-40GB-PCIe", 40},
		{"NVIDIA A100-SXM4-40GB", "A100-40GB-SXM", 40},
		{"a100", "A100-40GB-SXM", 40},
		{"Tesla V100-SXM2-32GB", "V100-32GB-SXM2", 31.7},
		{"Tesla V100-PCIE-16GB", "V100-16GB-PCIe", 15.8},
		{"NVIDIA GeForce RTX 4080 SUPER", "RTX-4080-SUPER", 16},
		{"NVIDIA GeForce RTX 4090", "RTX-4090", 24},
		{"NVIDIA GeForce RTX 3090", "RTX-3090", 24},
		{"NVIDIA RTX A6000", "RTX-A6000", 48},
		{"AMD Instinct MI300X", "MI300X", 192},
		{"h100-sxm", "H100-SXM", 79.6},
		{"rtx4090", "RTX-4090", 24},
	}
	for _, c := range cases {
		got, ok := Lookup(c.name)
		if !ok || got.Model != c.want || got.MemoryGiB != c.memGiB {
			t.Errorf("LookupGPU(%q) = %+v, %v; want %s with %.1f GiB", c.name, got, ok, c.want, c.memGiB)
		}
		if ok && (got.PeakTFLOPS <= 0 || got.MemoryBandwidthTBPerS <= 0) {
			t.Errorf("LookupGPU(%q) has empty figures: %+v", c.name, got)
		}
	}
	for _, bad := range []string{"", "NVIDIA GeForce GTX 1080", "Quadro P4000", "NVIDIA"} {
		if got, ok := Lookup(bad); ok {
			t.Errorf("LookupGPU(%q) = %+v, want not found", bad, got)
		}
	}
}

// TestLookupGPUFixtures reads the GPU names from real `nvidia-smi -L`
// captures (testdata/nvidia-smi, provenance in its README) so the probe's
// input is known to resolve, and checks the catalog's memory against the
// memory.total nvidia-smi reported in the same capture set.
func TestLookupGPUFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/nvidia-smi/*.L.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no nvidia-smi fixtures in testdata/nvidia-smi: %v", err)
	}
	lineRE := regexp.MustCompile(`^GPU \d+: (.+) \(UUID`)
	wantMiB := map[string]float64{"H100-SXM": 81559, "H200": 143771, "L40S": 46068, "RTX-4080-SUPER": 16376}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := lineRE.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no GPU line", f)
		}
		spec, ok := Lookup(string(m[1]))
		if !ok {
			t.Errorf("%s: %q not in catalog", f, m[1])
			continue
		}
		if mib, ok := wantMiB[spec.Model]; ok {
			if d := spec.MemoryGiB - mib/1024; d > 0.1 || d < -0.1 {
				t.Errorf("%s: catalog memory %.2f GiB, nvidia-smi says %.2f GiB", spec.Model, spec.MemoryGiB, mib/1024)
			}
		}
	}
}

func TestResolveGPUExplicitOverrides(t *testing.T) {
	got, _, complete := Resolve(Spec{Model: "H100 SXM", MemoryGiB: 64})
	if !complete || got.MemoryGiB != 64 || got.PeakTFLOPS != 989 {
		t.Errorf("override: %+v complete=%v", got, complete)
	}
	if _, _, complete := Resolve(Spec{Model: "Mystery-9000", MemoryGiB: 10}); complete {
		t.Error("unknown GPU without TFLOP/s must be incomplete")
	}
	got, _, complete = Resolve(Spec{Model: "Mystery-9000", MemoryGiB: 10, PeakTFLOPS: 50})
	if !complete || got.MemoryBandwidthTBPerS != defaultGPUMemoryBandwidthTBPerS {
		t.Errorf("unknown complete GPU: %+v %v", got, complete)
	}
}

// The probe writes the catalog name back into cluster files, so every
// catalog name must resolve to its own entry.
func TestCatalogNamesResolveToThemselves(t *testing.T) {
	for _, e := range gpuCatalog {
		if got, ok := Lookup(e.spec.Model); !ok || got != e.spec {
			t.Errorf("LookupGPU(%q) = %+v, %v", e.spec.Model, got, ok)
		}
	}
}

func TestGPUSpecMemoryBytes(t *testing.T) {
	if got := (Spec{MemoryGiB: 80}).MemoryBytes(); got != 80*1024*1024*1024 {
		t.Errorf("80 GiB = %g bytes", got)
	}
}

// Issue 29: GPUs before Ampere have no bf16 and run no flash-attention
// kernel; the catalog says so, by any spelling; unknown GPUs are taken to
// have both.
func TestPreAmpereGPUs(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  bool
	}{
		{"Tesla V100-SXM2-32GB", true}, {"V100-PCIE-16GB", true}, {"NVIDIA TITAN RTX", true}, {"NVIDIA GeForce RTX 2080 Ti", true},
		{"NVIDIA A100-SXM4-80GB", false}, {"NVIDIA H100 80GB HBM3", false}, {"RTX 3090", false}, {"MI250X", false}, {"my-own-accelerator", false},
	} {
		g := Spec{Model: tc.name}
		if HasBF16(g) == tc.old || HasFlashAttention(g) == tc.old {
			t.Errorf("%s: bf16 %t, flash attention %t; want %t", tc.name, HasBF16(g), HasFlashAttention(g), !tc.old)
		}
	}
}
