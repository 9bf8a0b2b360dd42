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

// TestLookupRefusesUnknownWords (issue 31): "xxA100-80GB-SXM" and
// "A100-80GB-SXM banana" were planned as A100s, the catalog's pattern found
// inside them. A word no catalog or nvidia-smi name uses makes the name
// unknown; nvidia-smi's own words still resolve.
func TestLookupRefusesUnknownWords(t *testing.T) {
	for _, name := range []string{"xxA100-80GB-SXM", "A100-80GB-SXM banana", "H100 fake", "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "superA100"} {
		if s, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %s, want unknown", name, s.Model)
		}
	}
	for name, want := range map[string]string{"NVIDIA A100 80GB PCIe": "A100-80GB-PCIe", "Tesla V100-PCIE-32GB": "V100-32GB-PCIe",
		"NVIDIA TITAN RTX": "TITAN-RTX", "NVIDIA GeForce RTX 2080 Ti": "RTX-2080-Ti", "NVIDIA GH200 480GB": "GH200", "NVIDIA B200": "B200"} {
		if s, ok := Lookup(name); !ok || s.Model != want {
			t.Errorf("Lookup(%q) = %q, %v; want %s", name, s.Model, ok, want)
		}
	}
}
