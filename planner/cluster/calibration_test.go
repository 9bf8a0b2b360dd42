package cluster

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// twoIslandCPU is a test-bed-like cluster: two islands of two CPU hosts
// with two slots each (shared with planner/search's calibration tests).
var twoIslandCPU = "\n" + readTestdata("testdata/two-island-cpu.yaml")

func readTestdata(name string) string {
	data, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(data)
}

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
	ra := 0.04 / (1 * gpu.GEMMEfficiency(g0, 512, 512, 512))
	rb := 0.05 / (1 * gpu.GEMMEfficiency(g0, 1024, 1024, 1024))
	wantA := (ra + rb) / 2
	wantB := 0.1 / gpu.GEMMEfficiency(g0, 1024, 1024, 1024)
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
	if got, want := gpu.GEMMSeconds(g, 1024, 1024, 1024), 2*math.Pow(1024, 3)/0.1e12+gpu.GEMMLaunchS; math.Abs(got/want-1) > 1e-9 {
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
	_, err = Parse([]byte(bad))
	for _, want := range []string{`measured_compute.hosts[1].host (line 28, column 13): unknown host "zz"`, "measured_compute.hosts[1].gemm[0].tflops (line 32, column 64): must be a number from 0.0001 to 100000 TFLOP/s, got -1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not contain %q", err, want)
		}
	}
}

// A calibration's cross-validation survives the cluster file, and plan's
// summary line says how much of the fitted correction it kept when it
// kept less than all.
func TestCalibrationCrossValidationInFileAndSummary(t *testing.T) {
	const section = `
calibration:
  updated_at: 2026-11-26T00:00:00Z
  compute: {factor: 1.01, observations: 3}
  runs:
    - {source: r0.log, plan: p, iterations: 10, observed_iteration_s: 2, predicted_iteration_s: 1.8, parts_s: {compute: 1.8}}
  cross_validation: {folds: 3, kept: %s}
`
	for _, tc := range []struct {
		kept, want string
	}{
		{"0.25", "calibrated from 1 runs, last error 10.0% (compute x1.010; 25% of the fitted correction kept: the runs disagree)"},
		{"1", "calibrated from 1 runs, last error 10.0% (compute x1.010)"},
	} {
		f := mustParseCluster(t, twoIslandCPU+strings.Replace(section, "%s", tc.kept, 1))
		data, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		g := mustParseCluster(t, string(data))
		cv := g.Calibration.CrossValidation
		if cv == nil || cv.Folds != 3 {
			t.Fatalf("kept %s: cross_validation lost in the round trip: %+v\n%s", tc.kept, cv, data)
		}
		if got := g.Calibration.Summary(); got != tc.want {
			t.Errorf("kept %s: summary %q, want %q", tc.kept, got, tc.want)
		}
	}
}
