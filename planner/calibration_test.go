package planner

import (
	"math"
	"strings"
	"testing"
	"time"
)

// twoIslandCPU is a test-bed-like cluster: two islands of two CPU hosts
// with two slots each.
const twoIslandCPU = `
clusters:
  - name: a
    hosts: [a1, a2]
    gpus_per_host: 2
    gpu: {model: cpu, memory_gib: 4, peak_bf16_tflops: 1}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 10}]
  - name: b
    hosts: [b1, b2]
    gpus_per_host: 2
    gpu: {model: cpu, memory_gib: 4, peak_bf16_tflops: 1}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 10}]
links:
  - {between: [a, b], type: ethernet, bandwidth_gbit_per_s: 0.1}
`

const measuredSection = `
measured_compute:
  measured_at: 2026-11-23T01:00:00Z
  tool: torch 1.13.1 (cpu)
  hosts:
    - host: a1
      device: cpu
      workers: 2
      gemm:
        - {precision: fp32, m: 512, n: 512, k: 512, tflops: 0.04}
        - {precision: fp32, m: 1024, n: 1024, k: 1024, tflops: 0.05}
      allreduce_bus_gbyte_per_s: 0.8
    - host: b1
      device: cpu
      workers: 2
      gemm:
        - {precision: fp32, m: 1024, n: 1024, k: 1024, tflops: 0.1}
`

func TestMeasuredComputeSetsIslandRateAndBus(t *testing.T) {
	f := mustParseCluster(t, twoIslandCPU+measuredSection)
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	// Island a: median of the two samples' measured/model ratios, each
	// by hand from the cost model's curve.
	g0 := c.Hosts[0].GPU
	ra := 0.04 / (1 * GEMMEfficiency(g0, 512, 512, 512))
	rb := 0.05 / (1 * GEMMEfficiency(g0, 1024, 1024, 1024))
	wantA := (ra + rb) / 2
	wantB := 0.1 / GEMMEfficiency(g0, 1024, 1024, 1024)
	for _, h := range c.Hosts {
		want := wantA
		if h.Island == 1 {
			want = wantB
		}
		if !near(h.GPU.PeakTFLOPS, want) {
			t.Errorf("%s: peak %g TFLOP/s, want %g", h.Name, h.GPU.PeakTFLOPS, want)
		}
	}
	if got := c.Hosts[1].IntraBytesPerS; !near(got, 0.8e9) {
		t.Errorf("a2 (unmeasured, island a) intra bus %g B/s, want the island's measured 0.8e9", got)
	}
	if got, nominal := c.Hosts[2].IntraBytesPerS, 25e9; !near(got, nominal) {
		t.Errorf("b1 has no all-reduce figure: intra bus %g, want the nominal %g", got, nominal)
	}
	// A measured GEMM of a plan's shape now takes what was measured (plus
	// the cost model's per-kernel launch).
	g := c.Hosts[2].GPU
	if got, want := GEMMSeconds(g, 1024, 1024, 1024), 2*math.Pow(1024, 3)/0.1e12+gemmLaunchS; math.Abs(got/want-1) > 1e-9 {
		t.Errorf("measured shape priced at %g s, measured %g s", got, want)
	}
}

func TestMeasuredComputeRoundTripsAndValidates(t *testing.T) {
	f := mustParseCluster(t, twoIslandCPU+measuredSection)
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "- {precision: fp32, m: 512, ") {
		t.Errorf("samples are not one line each:\n%s", data)
	}
	g := mustParseCluster(t, string(data))
	if len(g.MeasuredCompute.Hosts) != 2 || g.MeasuredCompute.Hosts[0].GEMM[1].TFLOPS != 0.05 {
		t.Errorf("round trip lost samples: %+v", g.MeasuredCompute)
	}
	bad := strings.Replace(twoIslandCPU+measuredSection, "host: b1", "host: zz", 1)
	bad = strings.Replace(bad, "tflops: 0.1}", "tflops: -1}", 1)
	_, err = ParseClusterFile([]byte(bad))
	for _, want := range []string{`measured_compute.hosts[1].host (line 27, column 13): unknown host "zz"`, "measured_compute.hosts[1].gemm[0].tflops (line 31, column 64): must be > 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
}

// predictPinned prices one pinned config (as calibrate does).
func predictPinned(t *testing.T, m Model, fixed Constraints) func(*Cluster) (float64, error) {
	return func(c *Cluster) (float64, error) {
		res, err := Search(c, m, SearchOptions{Framework: FrameworkMegatron, GlobalBatch: 8, Fixed: fixed, TopK: 1, Seed: 1})
		if err != nil {
			return 0, err
		}
		return res.Plans[0].Predicted.IterationSeconds, nil
	}
}

var tinyModel = Model{Name: "tiny", NumLayers: 8, Hidden: 256, Heads: 4, SeqLength: 128, Vocab: 1024}

func pinned(tp, pp, dp, mb int) Constraints {
	f := false
	return Constraints{TP: tp, PP: pp, DP: dp, CP: 1, VPP: 1, MicroBatch: mb, Recompute: RecomputeNone, ZeroStage: -1,
		DistributedOptimizer: &f, SequenceParallel: &f, NoOffload: true}
}

// The model is homogeneous of degree one in its time factors, so the
// sensitivities reproduce the prediction: sum_k s_k x_k + fixed = T.
func TestSensitivitiesDecomposePrediction(t *testing.T) {
	f := mustParseCluster(t, twoIslandCPU)
	f.Calibration = &Calibration{Compute: CalibrationFactor{Factor: 1.3}, Links: []LinkCalibration{
		{Link: InterHostKey("a", "b"), CalibrationFactor: CalibrationFactor{Factor: 2}}}}
	run, err := Linearize(f, TransportAuto, predictPinned(t, tinyModel, pinned(2, 2, 2, 1)))
	if err != nil {
		t.Fatal(err)
	}
	sum := run.FixedS
	for _, p := range run.PartsS {
		sum += p
	}
	if math.Abs(sum/run.PredictedS-1) > 0.02 {
		t.Errorf("fixed + parts = %g, prediction %g (%+v)", sum, run.PredictedS, run)
	}
	for _, k := range []string{ComputeFactorKey, IntraHostKey("a"), InterHostKey("a", "b")} {
		if run.PartsS[k] <= 0 {
			t.Errorf("no part scaled by %s: %v", k, run.PartsS)
		}
	}
	if run.Factors[ComputeFactorKey] != 1.3 || run.Factors[InterHostKey("a", "b")] != 2 {
		t.Errorf("factors at run %v, want the calibration's", run.Factors)
	}
}

// Runs generated by a "true" cluster that differs from the model by known
// factors: the fit recovers the factors and predicts an unseen config. The
// fit is linear around the factors in force when each run was recorded, so
// factors far from them are reached over several calibrations, not one.
func TestFitCalibrationRecoversFactors(t *testing.T) {
	f := mustParseCluster(t, twoIslandCPU)
	truth := &Calibration{Compute: CalibrationFactor{Factor: 1.4}, Links: []LinkCalibration{
		{Link: IntraHostKey("a"), CalibrationFactor: CalibrationFactor{Factor: 1.5}},
		{Link: IntraHostKey("b"), CalibrationFactor: CalibrationFactor{Factor: 1.5}},
		{Link: InterHostKey("a", "b"), CalibrationFactor: CalibrationFactor{Factor: 0.8}}}}
	observe := func(fx Constraints) float64 {
		g := *f
		g.Calibration = truth
		c, err := g.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		v, err := predictPinned(t, tinyModel, fx)(c)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var runs []CalibrationRun
	for _, fx := range []Constraints{pinned(2, 2, 2, 1), pinned(1, 4, 2, 2), pinned(2, 4, 1, 1), pinned(1, 2, 4, 1)} {
		run, err := Linearize(f, TransportAuto, predictPinned(t, tinyModel, fx))
		if err != nil {
			t.Fatal(err)
		}
		run.ObservedS = observe(fx)
		runs = append(runs, run)
	}
	cal := FitCalibration(runs, time.Unix(0, 0))
	g := *f
	g.Calibration = cal
	c, err := g.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	unseen := pinned(2, 1, 4, 1)
	before, _ := predictPinned(t, tinyModel, unseen)(mustResolveFile(t, f))
	after, _ := predictPinned(t, tinyModel, unseen)(c)
	want := observe(unseen)
	errBefore, errAfter := math.Abs(before/want-1), math.Abs(after/want-1)
	t.Logf("unseen TP2 DP4: observed %.4f s, uncalibrated %.4f s (%.1f%%), calibrated %.4f s (%.1f%%); %s",
		want, before, 100*errBefore, after, 100*errAfter, cal.Summary())
	if errAfter > 0.06 || errAfter > errBefore/3 {
		t.Errorf("calibrated error %.1f%% (uncalibrated %.1f%%): want under 6%% and a third of before", 100*errAfter, 100*errBefore)
	}
	if cal.Compute.Observations != len(runs) || math.Abs(cal.Compute.Factor/1.4-1) > 0.1 {
		t.Errorf("compute factor %+v, want ~1.4 from %d runs", cal.Compute, len(runs))
	}
}

func mustResolveFile(t *testing.T, f *ClusterFile) *Cluster {
	t.Helper()
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// One run: the fit moves the prediction onto the observation.
func TestFitCalibrationOneRun(t *testing.T) {
	r := CalibrationRun{ObservedS: 2, PredictedS: 1, PartsS: map[string]float64{ComputeFactorKey: 0.8, "inter_host a": 0.2}}
	cal := FitCalibration([]CalibrationRun{r}, time.Unix(0, 0))
	pred := 0.8*cal.Compute.Factor + 0.2*cal.Factors()["inter_host a"]
	if math.Abs(pred/2-1) > 0.05 {
		t.Errorf("calibrated prediction %g s, observed 2 s (%s)", pred, cal.Summary())
	}
	if got := cal.Summary(); !strings.HasPrefix(got, "calibrated from 1 runs, last error 50.0%") {
		t.Errorf("summary %q", got)
	}
}

// A run recorded under a calibration: its parts are scaled by the factors
// then in force, and the refit is relative to them.
func TestFitCalibrationRelativeToFactorsAtRun(t *testing.T) {
	r := CalibrationRun{ObservedS: 3, PredictedS: 2, PartsS: map[string]float64{ComputeFactorKey: 2},
		Factors: map[string]float64{ComputeFactorKey: 2}}
	cal := FitCalibration([]CalibrationRun{r}, time.Unix(0, 0))
	if math.Abs(cal.Compute.Factor/3-1) > 0.03 || cal.Compute.Observations != 1 {
		t.Errorf("compute %+v, want ~3 (raw part 1 s, observed 3 s)", cal.Compute)
	}
}
