package search

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// fp32 GEMMs on Hopper (gpu.FP32GEMMMax, issue 22), against Aceso's
// per-op fp32 profiles on GH200 (testdata/profiles/aceso_gh96_fp32, its
// README gives the source): the four linear GEMMs of one decoder layer,
// forward, TP 1, sequence 2048.

const acesoFP32Dir = "testdata/profiles/aceso_gh96_fp32"

// acesoLinearOps are the profiles' linear GEMMs and their n x k as
// multiples of the hidden size (m is the micro-batch's tokens; FFN 4h).
var acesoLinearOps = []struct {
	name string
	n, k float64
}{
	{"enc-attention-qkv", 3, 1},
	{"enc-attention-dense", 1, 1},
	{"enc-MLP-GEMM-1", 4, 1},
	{"enc-MLP-GEMM-2", 1, 4},
}

// acesoModels are the profiled models (Aceso's profiler/model_configs.py).
var acesoModels = map[string]model.Model{
	"OPT-30":      {NumLayers: 48, Hidden: 7168, Heads: 56, SeqLength: 2048, Vocab: 50272},
	"GPT-Neo-2.7": {NumLayers: 32, Hidden: 2560, Heads: 32, SeqLength: 2048, Vocab: 128256},
	"OPT-350":     {NumLayers: 24, Hidden: 1024, Heads: 16, SeqLength: 2048, Vocab: 50272},
}

// acesoForwardS reads one profile's forward seconds per op.
func acesoForwardS(t *testing.T, name string, mb int) map[string]float64 {
	t.Helper()
	path := filepath.Join(acesoFP32Dir, fmt.Sprintf("%s_mbs%d_tp1_algo0.csv", name, mb))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]float64{}
	for _, r := range recs[1:] {
		us, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, r[0], err)
		}
		out[r[0]] = us * 1e-6
	}
	for _, op := range acesoLinearOps {
		if out[op.name] <= 0 {
			t.Fatalf("%s: no forward time for %s", path, op.name)
		}
	}
	return out
}

// TestFitFP32GEMMMax: gpu.FP32GEMMMax["hopper"] is the geometric mean, over
// OPT-30B's linear GEMMs at micro-batch 1-8, of the measured rate as a
// fraction of GH200's TF32 peak (a model in no published table).
func TestFitFP32GEMMMax(t *testing.T) {
	g, _ := gpu.Lookup("GH200")
	h := float64(acesoModels["OPT-30"].Hidden)
	sum, n := 0.0, 0
	for _, mb := range []int{1, 2, 4, 8} {
		got := acesoForwardS(t, "OPT-30", mb)
		m := 2048 * float64(mb)
		for _, op := range acesoLinearOps {
			rate := 2 * m * op.n * h * op.k * h / got[op.name]
			sum += math.Log(rate / (g.PeakFP32TFLOPS * 1e12))
			n++
		}
	}
	fit := math.Exp(sum / float64(n))
	t.Logf("fp32 GEMM max fitted on OPT-30 (%d GEMMs): %.4f (gpu: %.4f)", n, fit, gpu.FP32GEMMMax["hopper"])
	if math.Abs(fit-gpu.FP32GEMMMax["hopper"]) > 0.002 {
		t.Errorf("gpu.FP32GEMMMax[hopper] = %.4f, the fit on Aceso's OPT-30 profiles gives %.4f: update it and docs/cost-model.md", gpu.FP32GEMMMax["hopper"], fit)
	}
}

// TestFP32GEMMsMatchProfiles prices one decoder layer's linear GEMMs in fp32
// on GH200 at TP 1 as the cost model does and compares them with the sum of
// the profiled ops, on OPT-30B (the fit) and on the two models of Sailor's
// tables, GPT-Neo-2.7B and OPT-350M (not fitted). The 16-bit curve's ramp
// priced GPT-Neo's 47% (micro-batch 1) to 16% (8) and OPT-350M's about 50%
// too slow.
func TestFP32GEMMsMatchProfiles(t *testing.T) {
	g, _ := gpu.Lookup("GH200")
	cases := []struct {
		name string
		mbs  []int
	}{
		{"OPT-30", []int{1, 2, 4, 8}},
		{"GPT-Neo-2.7", []int{1, 2, 4, 8}},
		{"OPT-350", []int{4, 8}},
	}
	for _, tc := range cases {
		for _, mb := range tc.mbs {
			got := acesoForwardS(t, tc.name, mb)
			measured := 0.0
			for _, op := range acesoLinearOps {
				measured += got[op.name]
			}
			cfg := parallel.Config{TP: 1, PP: 1, CP: 1, MicroBatch: mb, Precision: gpu.PrecisionFP32}
			s := newLayerShape(acesoModels[tc.name], cfg)
			priced := s.gemmSeconds(g, gpu.CurveOf(g))
			t.Logf("%s micro-batch %d: priced %.3g ms, profiled %.3g ms (%+.0f%%)", tc.name, mb, 1e3*priced, 1e3*measured, 100*(priced/measured-1))
			if e := priced/measured - 1; math.Abs(e) > 0.15 {
				t.Errorf("%s micro-batch %d: linear GEMMs priced %.3g ms, profiled %.3g ms (%+.0f%%), want within 15%%", tc.name, mb, 1e3*priced, 1e3*measured, 100*e)
			}
		}
	}
}
