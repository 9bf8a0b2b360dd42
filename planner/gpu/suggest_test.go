package gpu

import "testing"

// TestSuggestMisspeltVariant (issue 21): "H100-PCI" (for PCIe) silently
// resolved to H100-SXM, 989 instead of 756 TFLOP/s. A misspelt variant
// resolves to nothing and Suggest names the variant; real spellings,
// nvidia-smi's included, resolve as before.
func TestSuggestMisspeltVariant(t *testing.T) {
	for _, tc := range []struct{ name, suggest, resolves string }{
		{"H100-PCI", "H100-PCIe", ""},
		{"h100 pcei", "H100-PCIe", ""},
		{"H100-NV", "H100-NVL", ""},
		{"H100-PCIe", "", "H100-PCIe"},
		{"NVIDIA H100 80GB HBM3", "", "H100-SXM"},
		{"NVIDIA H100 PCIe", "", "H100-PCIe"},
		{"NVIDIA A100-SXM4-80GB", "", "A100-80GB-SXM"},
		{"Tesla V100-SXM2-32GB", "", "V100-32GB-SXM2"},
		{"AMD Instinct MI300X", "", "MI300X"},
		{"NVIDIA GeForce RTX 4080 SUPER", "", "RTX-4080-SUPER"},
		{"NVIDIA A10G", "", "A10"},
		{"L40S", "", "L40S"},
	} {
		if got := Suggest(tc.name); got != tc.suggest {
			t.Errorf("Suggest(%q) = %q, want %q", tc.name, got, tc.suggest)
		}
		s, ok := Lookup(tc.name)
		if (tc.resolves != "") != ok || s.Model != tc.resolves {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tc.name, s.Model, ok, tc.resolves)
		}
	}
}
