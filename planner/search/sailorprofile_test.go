package search

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// sailorProfileDir holds Sailor's own per-layer profiles of OPT-350M in fp32
// (README.md there gives the source).
const sailorProfileDir = "testdata/profiles/sailor_opt350_fp32"

// sailorLayerS reads one decoder layer's forward + backward seconds at
// micro-batch mb and TP tp from Sailor's profile of gpuName
// (profile[mb][tp][layer] = [forward, backward, update]; layer 0 is the
// embedding, so a decoder layer in the middle is read).
func sailorLayerS(t *testing.T, gpuName string, mb, tp int) (float64, bool) {
	t.Helper()
	path := filepath.Join(sailorProfileDir, gpuName+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]map[string]map[string][]float64
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	l, ok := p[strconv.Itoa(mb)][strconv.Itoa(tp)]["5"]
	if !ok || len(l) < 2 {
		return 0, false
	}
	return l[0] + l[1], true
}

// TestFP32LayersMatchSailorProfiles prices one OPT-350M decoder layer in
// fp32 (forward and backward, with DeepSpeed's engine cost) on A100-40GB
// and V100-16GB, the two GPUs of Sailor's heterogeneous scenario, and
// compares it with Sailor's own profile of that layer on those GPUs: data
// no constant was fitted to (the engine cost comes from GH200 runs, the
// CUDA-core GEMM rate from V100 kernel profiles of OPT-30B). The ratio
// between the two GPUs decides how a heterogeneous plan splits its layers;
// before V100's fp32 GEMMs were priced on CUDA cores, V100's layer came out
// 60% slow at TP 1 and an fp32 plan of the scenario gave the A100 stage 14
// of 24 layers (6.27 s under Sailor's simulator, against 5.26 s now).
func TestFP32LayersMatchSailorProfiles(t *testing.T) {
	m := acesoModels["OPT-350"]
	for _, tc := range []struct{ profile, gpu string }{{"A100-40", "A100-40GB-SXM"}, {"V100-16", "V100-16GB-SXM2"}} {
		g, _ := gpu.Lookup(tc.gpu)
		for _, tp := range []int{1, 2, 4} {
			for _, mb := range []int{1, 2, 4} {
				measured, ok := sailorLayerS(t, tc.profile, mb, tp)
				if !ok {
					continue
				}
				cfg := parallel.Config{TP: tp, PP: 1, CP: 1, MicroBatch: mb, Precision: gpu.PrecisionFP32, ZeroStage: 1}
				c := layerCompute(m, cfg, g).plus(engineLayerCost(parallel.FrameworkDeepSpeed, cfg))
				priced := c.Fwd + c.Bwd
				e := priced/measured - 1
				t.Logf("%s TP %d micro-batch %d: priced %.2f ms, Sailor's profile %.2f ms (%+.0f%%)", tc.profile, tp, mb, 1e3*priced, 1e3*measured, 100*e)
				if math.Abs(e) > 0.2 {
					t.Errorf("%s TP %d micro-batch %d: layer priced %.2f ms, Sailor's profile %.2f ms (%+.0f%%), want within 20%%", tc.profile, tp, mb, 1e3*priced, 1e3*measured, 100*e)
				}
			}
		}
	}
}

// sailorGH200Profiles are the GH200 profiles Sailor's simulator validates
// with (testdata/profiles/sailor_gh96_fp32):
// profile[model][gpu][micro-batch][tp][layer] = [forward, backward, update].
type sailorGH200Profiles map[string]map[string]map[string]map[string]map[string][]float64

func loadSailorGH200Profiles(t *testing.T) sailorGH200Profiles {
	t.Helper()
	path := "testdata/profiles/sailor_gh96_fp32/profiles_tmp.json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var p sailorGH200Profiles
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// layerS is the mean forward + backward seconds of model's decoder layers
// on GH200 at micro-batch mb and TP tp.
func (p sailorGH200Profiles) layerS(t *testing.T, model string, mb, tp int) float64 {
	t.Helper()
	layers := p[model]["GH-96"][strconv.Itoa(mb)][strconv.Itoa(tp)]
	if len(layers) < 3 {
		t.Fatalf("no %s GH-96 profile at micro-batch %d, TP %d", model, mb, tp)
	}
	sum := 0.0
	for i := 1; i < len(layers)-1; i++ { // 0 is the embedding, the last the head
		l := layers[strconv.Itoa(i)]
		sum += l[0] + l[1]
	}
	return sum / float64(len(layers)-2)
}

// TestSailorGH200LayersSplitTheFamilies is why one DeepSpeed engine cost
// (deepSpeedEngineLayerS) cannot price both of Sailor's GH200 tables, and
// why each misses 10% scored with the other's (validationBounds). Sailor's
// own per-layer profiles, measured in its training code on the cluster of
// those runs (fit to nothing here), against the layer's kernels and TP
// all-reduces as priced (no engine cost), where the GPU is busy enough to
// hide the host (micro-batch 4 and up): OPT-350M's layer runs 11-18%
// slower than priced, GPT-Neo-2.7B's 3-12% faster, at TP 1 and 4 alike.
// Aceso's kernel profiles on GH200 say the same of the kernels alone
// (docs/cost-model.md): OPT-350M's layer in Sailor's code costs 28% more
// than the sum of its kernels, GPT-Neo's 5%. A cost added to every layer,
// fitted on one family, is then wrong for the other by about the gap
// between them: with the engine cost fitted on OPT-350M's runs, OPT's
// layers come out within 10% of the profile and GPT-Neo's 6-23% slow
// (the log says each). If this test fails,
// the kernels now price the two families alike: refit the engine cost
// (TestFitDeepSpeedEngine) and rescore both tables.
func TestSailorGH200LayersSplitTheFamilies(t *testing.T) {
	g, _ := gpu.Lookup("GH200")
	intra := publishedClusterNIC("gh200", 4, 0).LinkBetween(0, 0)
	profiles := loadSailorGH200Profiles(t)
	for _, tc := range []struct {
		model  string
		tp     int
		mbs    []int
		lo, hi float64 // bounds on Sailor's layer over the priced one
	}{
		{"OPT-350", 1, []int{4, 8, 16}, 1.05, 1.25},
		{"OPT-350", 4, []int{8, 16, 32}, 1.05, 1.25},
		{"GPT-Neo-2.7", 1, []int{4, 8, 16}, 0.8, 1.0},
		{"GPT-Neo-2.7", 4, []int{4, 8, 16}, 0.8, 1.0},
	} {
		for _, mb := range tc.mbs {
			cfg := parallel.Config{TP: tc.tp, PP: 1, CP: 1, MicroBatch: mb, Precision: gpu.PrecisionFP32}
			c := layerCompute(acesoModels[tc.model], cfg, g)
			tf, tb := tpCommPerLayer(acesoModels[tc.model], cfg, intra)
			priced := c.Fwd + c.Bwd + tf + tb
			measured := profiles.layerS(t, tc.model, mb, tc.tp)
			r := measured / priced
			t.Logf("%s TP %d micro-batch %d: Sailor's layer %.2f ms, kernels priced %.2f ms (x%.2f), with the engine cost %.2f ms", tc.model, tc.tp, mb, 1e3*measured, 1e3*priced, r, 1e3*(priced+deepSpeedEngineLayerS))
			if r < tc.lo || r > tc.hi {
				t.Errorf("%s TP %d micro-batch %d: Sailor's layer is x%.2f the priced kernels, want x%.2f-%.2f (see the test's comment)", tc.model, tc.tp, mb, r, tc.lo, tc.hi)
			}
		}
	}
}
