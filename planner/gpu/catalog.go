package gpu

import (
	"regexp"
	"slices"
	"strings"
)

// CatalogEntry is one GPU model the planner knows. Figures are the
// vendor datasheet values (fp32: see CatalogEntry.fp32): dense (no sparsity) bf16 tensor TFLOP/s (fp16 for
// V100, which has no bf16; fp32-accumulate rate for GeForce cards, which is
// what mixed-precision training uses), dense FP8 tensor TFLOP/s where the
// GPU has FP8 tensor cores (Hopper, Ada, Blackwell, MI300; see fp8), memory
// as nvidia-smi reports it (memory.total MiB / 1024), and HBM/GDDR
// bandwidth.
type CatalogEntry struct {
	spec Spec
	// match is tried against the compacted name (lower case, only a-z0-9).
	match *regexp.Regexp
	// IntraType and intraGBps are the default GPU-to-GPU bus of the usual
	// server for this GPU (per-GPU unidirectional GB/s for NVLink/NVSwitch).
	IntraType string
	IntraGBps float64
	PCIeGen   int
	// preAmpere marks NVIDIA GPUs before Ampere (Volta, Turing): no bf16
	// arithmetic and no flash-attention kernel (see HasBF16,
	// HasFlashAttention).
	preAmpere bool
}

// beforeAmpere marks an NVIDIA GPU older than Ampere (compute capability
// below 8.0: Volta 7.0, Turing 7.5).
func (e CatalogEntry) beforeAmpere() CatalogEntry {
	e.preAmpere = true
	return e
}

// HasBF16 reports whether g computes in bf16. NVIDIA's GPUs before Ampere
// have no bf16 arithmetic (bf16 tensor cores came with Ampere; PyTorch's
// torch.cuda.is_bf16_supported() is false below compute capability 8.0),
// so a bf16 run there fails or crawls: mixed precision is fp16. A GPU the
// catalog does not know is taken to have it.
func HasBF16(g Spec) bool {
	e, ok := lookupCatalog(g.Model)
	return !ok || !e.preAmpere
}

// HasFlashAttention reports whether a fused flash-attention kernel runs on
// g: FlashAttention-2 and Transformer Engine's fused attention (cuDNN)
// need Ampere or later, so on Volta and Turing the attention runs unfused
// and stores its s x s scores. A GPU the catalog does not know is taken to
// run one.
func HasFlashAttention(g Spec) bool {
	e, ok := lookupCatalog(g.Model)
	return !ok || !e.preAmpere
}

// fp32 sets the rate fp32 GEMMs run at (Spec.PeakFP32TFLOPS): the
// datasheet's dense TF32 tensor TFLOP/s (half its "with sparsity" figure),
// or the FP32 TFLOP/s on GPUs without TF32 (Volta, Turing, CDNA2).
func (e CatalogEntry) fp32(tflops float64) CatalogEntry {
	e.spec.PeakFP32TFLOPS = tflops
	return e
}

// sms sets the SM count (Spec.SMs), from the architecture whitepapers:
// H100 SXM5 and NVL 132, H100 PCIe 114, H200 and GH200 132 (the H100 SXM5
// configuration), A100 108, V100 80, B200 148.
func (e CatalogEntry) sms(n int) CatalogEntry {
	e.spec.SMs = n
	return e
}

// fp8 sets the dense FP8 tensor-core TFLOP/s (datasheet, no sparsity).
func (e CatalogEntry) fp8(tflops float64) CatalogEntry {
	e.spec.PeakFP8TFLOPS = tflops
	return e
}

func gpu(model string, memGiB, tflops, tbps float64, match, intra string, intraGBps float64, gen int) CatalogEntry {
	return CatalogEntry{
		spec:      Spec{Model: model, MemoryGiB: memGiB, PeakTFLOPS: tflops, MemoryBandwidthTBPerS: tbps},
		match:     regexp.MustCompile(match),
		IntraType: intra,
		IntraGBps: intraGBps,
		PCIeGen:   gen,
	}
}

// gpuCatalog is ordered so that the first match wins: specific variants
// come before their generic family. A bare family name resolves to the
// smaller-memory variant (A100 -> 40GB, V100 -> 16GB) so that an ambiguous
// name never overstates capacity.
var gpuCatalog = []CatalogEntry{
	// TF32 dense per GPU: GB200 NVL72 datasheet 5 PFLOP/s sparse per
	// superchip (two GPUs) -> 1.25; HGX B200 datasheet 18 PFLOP/s sparse for
	// eight -> 1.125. Hopper (H100/H200/GH200 datasheets): 989/835/756
	// sparse -> 494.7 (SXM, GH200, H200), 417.5 (NVL), 378 (PCIe). A100:
	// 156. V100 (no TF32): fp32 15.7 SXM2, 14 PCIe. L40S 183, L40 90.5,
	// L4 60, A10 62.5, RTX A6000 77.4 (datasheets, dense). GeForce (Ampere
	// GA102 and Ada whitepapers): RTX 3090 35.6, 4090 82.6, 4080 SUPER
	// 52.2. MI250X (no TF32): fp32 matrix 95.7 per package -> 47.9 per
	// GCD; MI300X TF32 653.7 dense.
	// B200 (HGX B200, 1000 W): 180 GB HBM3e as nvidia-smi reports it
	// (183359 MiB), dense bf16 2.25 PFLOP/s, fp8 4.5, 8 TB/s, NVLink 5 at
	// 900 GB/s per GPU each way. GB200 before B200 ("gb200" contains
	// "b200"): the NVL72 part, 186 GB, 2.5/5 PFLOP/s.
	gpu("GB200", 184.0, 2500, 8.0, `gb200`, "nvswitch", 900, 6).fp8(5000).fp32(1250),
	gpu("B200", 179.1, 2250, 8.0, `b200`, "nvswitch", 900, 6).fp8(4500).fp32(1125).sms(148),
	// GH200 before H200 ("gh200" contains "h200"); the 96 GB HBM3 variant.
	gpu("GH200", 95.6, 989, 4.0, `gh200`, "nvswitch", 450, 5).fp8(1979).fp32(494.7).sms(132),
	gpu("H200", 140.4, 989, 4.8, `h200`, "nvswitch", 450, 5).fp8(1979).fp32(494.7).sms(132),
	gpu("H100-NVL", 93.6, 835, 3.9, `h100.*nvl|nvl.*h100`, "pcie", 0, 5).fp8(1671).fp32(417.5).sms(132),
	gpu("H100-PCIe", 79.6, 756, 2.0, `h100.*pcie|pcie.*h100`, "pcie", 0, 5).fp8(1513).fp32(378).sms(114),
	gpu("H100-SXM", 79.6, 989, 3.35, `h100`, "nvswitch", 450, 5).fp8(1979).fp32(494.7).sms(132),
	gpu("A100-80GB-PCIe", 80, 312, 1.935, `a100.*(80g.*pcie|pcie.*80g)`, "pcie", 0, 4).fp32(156).sms(108),
	gpu("A100-80GB-SXM", 80, 312, 2.039, `a100.*80g`, "nvswitch", 300, 4).fp32(156).sms(108),
	gpu("A100-40GB-PCIe", 40, 312, 1.555, `a100.*pcie`, "pcie", 0, 4).fp32(156).sms(108),
	gpu("A100-40GB-SXM", 40, 312, 1.555, `a100`, "nvswitch", 300, 4).fp32(156).sms(108),
	gpu("V100-32GB-PCIe", 31.7, 112, 0.9, `v100.*(32g.*pcie|pcie.*32g)`, "pcie", 0, 3).fp32(14).sms(80).beforeAmpere(),
	gpu("V100-32GB-SXM2", 31.7, 125, 0.9, `v100.*32g`, "nvlink", 150, 3).fp32(15.7).sms(80).beforeAmpere(),
	gpu("V100-16GB-PCIe", 15.8, 112, 0.9, `v100.*pcie`, "pcie", 0, 3).fp32(14).sms(80).beforeAmpere(),
	gpu("V100-16GB-SXM2", 15.8, 125, 0.9, `v100`, "nvlink", 150, 3).fp32(15.7).sms(80).beforeAmpere(),
	gpu("L40S", 45, 362, 0.864, `l40s`, "pcie", 0, 4).fp8(733).fp32(183),
	gpu("L40", 45, 181, 0.864, `l40([^0-9a-z]|$)`, "pcie", 0, 4).fp32(90.5),
	gpu("L4", 22.5, 121, 0.3, `l4([^0-9a-z]|$)`, "pcie", 0, 4).fp8(242).fp32(60),
	gpu("A10", 22.5, 125, 0.6, `(^|[^0-9])a10($|[^0-9])|a10g`, "pcie", 0, 4).fp32(62.5),
	gpu("RTX-A6000", 48, 154.8, 0.768, `a6000`, "pcie", 0, 4).fp32(77.4),
	gpu("RTX-4090", 24, 165.2, 1.008, `4090`, "pcie", 0, 4).fp8(330.3).fp32(82.6),
	gpu("RTX-4080-SUPER", 16, 104.4, 0.736, `4080super`, "pcie", 0, 4).fp32(52.2),
	gpu("RTX-3090", 24, 71, 0.936, `3090`, "pcie", 0, 4).fp32(35.6),
	// Turing (TU102) has no bf16 and no TF32: the 16-bit figure is fp16
	// with fp32 accumulate, fp32 GEMMs run on CUDA cores. TITAN RTX: NVIDIA
	// TITAN RTX datasheet, 130.5 TFLOP/s fp16 tensor (full-rate fp32
	// accumulate on TITAN), 16.3 TFLOP/s fp32, 24 GB GDDR6 at 672 GB/s,
	// PCIe 3 (the two-way NVLink bridge is not modelled). RTX 2080 Ti:
	// Turing architecture whitepaper (Founders Edition), 53.8 TFLOP/s fp16
	// tensor with fp32 accumulate (GeForce: half rate), 13.4 fp32,
	// 11 GB at 616 GB/s, PCIe 3.
	gpu("TITAN-RTX", 24, 130.5, 0.672, `titanrtx`, "pcie", 0, 3).fp32(16.3).beforeAmpere(),
	gpu("RTX-2080-Ti", 11, 53.8, 0.616, `2080ti`, "pcie", 0, 3).fp32(13.4).beforeAmpere(),
	// AMD: each MI250X GCD is its own device (64 GiB, half the package).
	gpu("MI250X", 64, 191.5, 1.6, `mi250x`, "nvlink", 100, 4).fp32(47.9),
	gpu("MI300X", 192, 1307, 5.3, `mi300x`, "nvswitch", 448, 5).fp8(2615).fp32(653.7),
}

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// compactGPUName lower-cases a name and drops vendor words and punctuation,
// so "NVIDIA GeForce RTX 4080 SUPER" and "rtx-4080-super" compare equal.
func compactGPUName(name string) string {
	return nonAlnum.ReplaceAllString(withoutVendor(name), "")
}

// withoutVendor is name in lower case with the vendor words blanked out.
func withoutVendor(name string) string {
	s := strings.ToLower(name)
	for _, w := range []string{"nvidia", "geforce", "tesla", "amd", "instinct", "radeon"} {
		s = strings.ReplaceAll(s, w, " ")
	}
	return s
}

// knownWords are the words (runs of letters) a GPU name may hold besides
// numbers and vendor words: those of the catalog's names and the others
// nvidia-smi prints (variantWords, otherWords). A name with any other word
// ("banana", the "xx" of "xxA100-80GB-SXM") is not the catalog GPU its
// letters happen to contain.
var knownWords = func() map[string]bool {
	w := map[string]bool{}
	for _, e := range gpuCatalog {
		for _, r := range wordRuns.FindAllString(withoutVendor(e.spec.Model), -1) {
			w[r] = true
		}
	}
	for _, v := range variantWords {
		w[v] = true
	}
	for k := range otherWords {
		w[k] = true
	}
	return w
}()

// unknownWord is the first word of name the catalog's names do not use,
// or "".
func unknownWord(name string) string {
	for _, r := range wordRuns.FindAllString(withoutVendor(name), -1) {
		if !knownWords[r] {
			return r
		}
	}
	return ""
}

// Names lists the catalog's GPU names, for an error about a name it lacks.
func Names() []string {
	out := make([]string, len(gpuCatalog))
	for i, e := range gpuCatalog {
		out[i] = e.spec.Model
	}
	return out
}

func lookupCatalog(name string) (CatalogEntry, bool) {
	c := compactGPUName(name)
	if c == "" || Suggest(name) != "" || unknownWord(name) != "" {
		return CatalogEntry{}, false // a misspelt variant is not its family's default
	}
	for _, e := range gpuCatalog {
		if e.match.MatchString(c) {
			return e, true
		}
	}
	return CatalogEntry{}, false
}

// variantWords tell a family's variants apart (H100-PCIe, H100-NVL,
// H100-SXM); with the other words nvidia-smi prints ("80GB HBM3") they are
// the words a catalog name may carry besides its family.
var (
	variantWords = []string{"pcie", "nvl", "sxm"}
	otherWords   = map[string]bool{"gb": true, "hbm": true, "e": true, "super": true, "x": true, "a": true, "s": true, "g": true}
	wordRuns     = regexp.MustCompile(`[a-z]+`)
)

// Suggest names the catalog variant a GPU name misspells ("H100-PCI" is
// H100-PCIe, not the family's default H100-SXM: 756 vs 989 TFLOP/s), or
// "" when the name has no such near miss. Lookup does not resolve a name
// Suggest answers for.
func Suggest(name string) string {
	c := compactGPUName(name)
	for _, w := range wordRuns.FindAllString(c, -1) {
		if otherWords[w] || slices.Contains(variantWords, w) {
			continue
		}
		for _, v := range variantWords {
			if !(len(w) >= 2 && strings.HasPrefix(v, w)) && !nearMiss(w, v) {
				continue
			}
			fixed := strings.Replace(c, w, v, 1)
			for _, e := range gpuCatalog {
				if strings.Contains(compactGPUName(e.spec.Model), v) && e.match.MatchString(fixed) {
					return e.spec.Model
				}
			}
		}
	}
	return ""
}

// nearMiss: a and b differ by one letter changed, dropped or added, or
// two neighbours swapped.
func nearMiss(a, b string) bool {
	if a == b || len(a) < 2 {
		return false
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	switch len(b) - len(a) {
	case 0:
		var diff []int
		for i := range a {
			if a[i] != b[i] {
				diff = append(diff, i)
			}
		}
		swapped := len(diff) == 2 && diff[1] == diff[0]+1 && a[diff[0]] == b[diff[1]] && a[diff[1]] == b[diff[0]]
		return len(diff) == 1 || swapped
	case 1:
		for i := range b {
			if b[:i]+b[i+1:] == a {
				return true
			}
		}
	}
	return false
}

// MemoryBytes is the GPU's memory in bytes (MemoryGiB is binary GiB).
func (g Spec) MemoryBytes() float64 { return g.MemoryGiB * GiB }

// Lookup finds a GPU in the built-in catalog by any common spelling,
// including the names nvidia-smi prints ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB"). The returned spec's Model is the catalog name.
func Lookup(name string) (Spec, bool) {
	e, ok := lookupCatalog(name)
	return e.spec, ok
}

// defaultGPUMemoryBandwidthTBPerS is used for a GPU that is not in the
// catalog and whose bandwidth the file does not give; it only feeds the
// latency model's memory-bound terms, so a middling value is safe.
const defaultGPUMemoryBandwidthTBPerS = 1.0

// Resolve fills the zero fields of s from the catalog. Explicit values
// always win. An unknown model must give memory and TFLOP/s itself.
func Resolve(s Spec) (Spec, CatalogEntry, bool) {
	e, ok := lookupCatalog(s.Model)
	out := s
	if ok {
		if out.MemoryGiB == 0 {
			out.MemoryGiB = e.spec.MemoryGiB
		}
		if out.PeakTFLOPS == 0 {
			out.PeakTFLOPS = e.spec.PeakTFLOPS
		}
		if out.MemoryBandwidthTBPerS == 0 {
			out.MemoryBandwidthTBPerS = e.spec.MemoryBandwidthTBPerS
		}
		if out.PeakFP8TFLOPS == 0 {
			out.PeakFP8TFLOPS = e.spec.PeakFP8TFLOPS
		}
		if out.PeakFP32TFLOPS == 0 {
			out.PeakFP32TFLOPS = e.spec.PeakFP32TFLOPS
		}
		if out.SMs == 0 {
			out.SMs = e.spec.SMs
		}
	} else if out.MemoryBandwidthTBPerS == 0 {
		out.MemoryBandwidthTBPerS = defaultGPUMemoryBandwidthTBPerS
	}
	complete := out.MemoryGiB > 0 && out.PeakTFLOPS > 0
	return out, e, complete
}
