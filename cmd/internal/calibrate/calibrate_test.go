package calibrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/plan"
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/urfave/cli/v2"
)

const calibrateCluster = `# a hand-written cluster: this comment must survive calibrate
clusters:
  - name: a
    hosts: [a1, a2]
    gpus_per_host: 2
    gpu: {model: cpu, memory_gib: 8, peak_bf16_tflops: 1}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 10}]
`

const calibrateModel = `name: tiny
num_layers: 8
hidden_size: 256
num_attention_heads: 4
seq_length: 128
vocab_size: 1024
`

// A run observed 30% slower than predicted: calibrate records it, the
// factors move the prediction onto it, the file keeps its comment, and
// plan reports the calibration and uses it.
func TestCalibrateFromPlanAndMegatronLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cluster := filepath.Join(dir, "cluster.yaml")
	model := filepath.Join(dir, "tiny.yaml")
	for p, s := range map[string]string{cluster: calibrateCluster, model: calibrateModel} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	planFlags := plan.Options{ClusterFile: cluster, Model: model, GlobalBatch: 8, Top: 1, Seed: 1,
		Fixed: parallel.Constraints{TP: 2, PP: 2, VPP: 1, ZeroStage: -1}, NCCLMode: "auto"}
	var planOut bytes.Buffer
	po := planFlags
	po.IO, po.JSON = &cmdutil.IOStreams{Out: &planOut, ErrOut: &planOut}, true
	if err := plan.Run(&po); err != nil {
		t.Fatalf("plan: %v\n%s", err, planOut.String())
	}
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, planOut.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pj, err := targetFromPlanFile(planFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	predicted := predictTarget(t, cluster, pj)
	observed := 1.3 * predicted
	var log strings.Builder
	for i := 1; i <= 5; i++ {
		ms := observed * 1000
		if i == 1 {
			ms *= 3 // warm-up, dropped by --skip 1
		}
		fmt.Fprintf(&log, " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: 1.0E-04 |\n", i, 5, 8*i, ms)
	}
	logFile := filepath.Join(dir, "rank3.log")
	if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &out}, ClusterFile: cluster, Logs: []string{logFile},
		PlanFile: planFile, NCCLMode: "auto", Skip: 1, Now: func() time.Time { return time.Unix(1.8e9, 0) }}
	if err := Run(opts); err != nil {
		t.Fatalf("calibrate: %v\n%s", err, out.String())
	}
	t.Logf("calibrate:\n%s", out.String())
	// The log has milliseconds to one decimal: the error is against that.
	logged := math.Round(observed*1e4) / 1e4
	errPct := fmt.Sprintf("%.1f%%", 100*math.Abs(predicted/logged-1))
	for _, want := range []string{"median of 4 iterations", "error -" + errPct, "wrote the calibration"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	data, _ := os.ReadFile(cluster)
	if !strings.HasPrefix(string(data), "# a hand-written cluster") {
		t.Errorf("comment lost:\n%s", data)
	}
	// One run 30% off is as likely the model's own per-configuration
	// scatter (8%) in a rare draw as a cluster off the model
	// (planner/calibration.Fit's prior): about half the correction is
	// applied, and calibrate says why.
	after := predictTarget(t, cluster, pj)
	if math.Abs(after/observed-1) > 0.6*math.Abs(predicted/observed-1) {
		t.Errorf("calibrated prediction %.4f s, observed %.4f s: want at least 40%% of the error corrected", after, observed)
	}
	if !strings.Contains(out.String(), "with 1 runs only part of the correction is applied") {
		t.Errorf("output does not say the correction is partial:\n%s", out.String())
	}
	var table bytes.Buffer
	po = planFlags
	po.IO = &cmdutil.IOStreams{Out: &table, ErrOut: &table}
	if err := plan.Run(&po); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "calibrated from 1 runs, last error "+errPct) {
		t.Errorf("plan does not report the calibration:\n%s", table.String())
	}
}

func predictTarget(t *testing.T, cluster string, target calibrateTarget) float64 {
	t.Helper()
	c, err := plan.LoadCluster(cluster, fabric.TransportAuto)
	if err != nil {
		t.Fatal(err)
	}
	res, err := search.Search(c, target.model, target.so)
	if err != nil {
		t.Fatal(err)
	}
	return res.Plans[0].Predicted.IterationSeconds
}

func TestCalibrateBadInputExit2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cluster := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(cluster, []byte(calibrateCluster), 0o644)
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, []byte("nothing here\n"), 0o644)
	// Issue 31: an absurd time is refused naming the file and line, even
	// beside a good log (it was recorded as observed).
	absurd := filepath.Join(dir, "absurd.log")
	os.WriteFile(absurd, []byte(" iteration 2/ 9 | elapsed time per iteration (ms): 120.5 |\n iteration 3/ 9 | elapsed time per iteration (ms): 1e30 |\n"), 0o644)
	good := filepath.Join(dir, "good.log")
	os.WriteFile(good, []byte(" iteration 2/ 9 | elapsed time per iteration (ms): 120.5 |\n iteration 3/ 9 | elapsed time per iteration (ms): 121.0 |\n"), 0o644)
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no cluster", Options{ClusterFile: filepath.Join(dir, "nope.yaml")}, "--cluster"},
		{"nothing says what ran", Options{ClusterFile: cluster, Logs: []string{empty}}, "say what ran"},
		{"no iteration lines", Options{ClusterFile: cluster, Logs: []string{empty}, Model: "gpt3-125m", GlobalBatch: 8,
			Fixed: parallel.Constraints{TP: 1, PP: 1, ZeroStage: -1}}, "no iteration times"},
		{"absurd iteration time", Options{ClusterFile: cluster, Logs: []string{good, absurd}, Model: "gpt3-125m", GlobalBatch: 8, Skip: 1,
			Fixed: parallel.Constraints{TP: 1, PP: 1, ZeroStage: -1}}, absurd + ": line 2: elapsed time per iteration (ms) is 1e30: want an iteration time from 0.000001 to 1000000 s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			tc.opts.IO, tc.opts.NCCLMode = &cmdutil.IOStreams{Out: &out, ErrOut: &out}, "auto"
			err := Run(&tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || cmdtest.ExitCode(err) != 2 {
				t.Errorf("err %v (exit %d), want %q and exit 2", err, cmdtest.ExitCode(err), tc.want)
			}
		})
	}
}

// Issue 22: flags after the first LOG are flags (they were read as log
// files: "open --dp"), and the flags form pins what ran, "off" included
// (--distributed-optimizer=false, --no-offload), instead of searching it.
func TestCalibrateFlagsAfterLogsAndPinnedOff(t *testing.T) {
	dir := t.TempDir()
	clusterFile := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(clusterFile, []byte(calibrateCluster), 0o644)
	s := runPinned(t, dir, clusterFile, "--dry-run")
	if !strings.Contains(s, "TP1 PP2 DP2 mb1 gbs8 distopt=off sp=off offload=off") {
		t.Errorf("calibrate priced another configuration than the pinned one:\n%s", s)
	}
	t.Log(s)
}

// TestCalibratePricesTheRunOnPlansTransport: on two islands whose hosts'
// versions let a Megatron job keep RDMA inside the InfiniBand island,
// `plan` prices one network per group type; calibrate must price the run
// the same way, or the factors are fitted to a sockets-everywhere
// prediction the plan never made (TP2 PP2 DP8 of llama2-13b: 3.1 s per
// iteration with RDMA inside the island, 10.1 s on sockets). A run that took exactly the plan's
// predicted time is then predicted with no error.
func TestCalibratePricesTheRunOnPlansTransport(t *testing.T) {
	t.Parallel()
	clusterFile := cmdtest.TwoClustersWithVersions(t)
	dir := t.TempDir()
	var planOut bytes.Buffer
	po := plan.Options{IO: &cmdutil.IOStreams{Out: &planOut, ErrOut: &planOut}, JSON: true, ClusterFile: clusterFile,
		Model: "llama2-13b", GlobalBatch: 64, Top: 1, Seed: 1, NCCLMode: "auto", Fixed: parallel.Constraints{TP: 2, PP: 2, ZeroStage: -1}}
	if err := plan.Run(&po); err != nil {
		t.Fatalf("plan: %v\n%s", err, planOut.String())
	}
	var pj planJSON
	if err := json.Unmarshal(planOut.Bytes(), &pj); err != nil || len(pj.Plans) == 0 {
		t.Fatalf("plan --json: %v\n%s", err, planOut.String())
	}
	planned := pj.Plans[0].Predicted.IterationSeconds
	planFile := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(planFile, planOut.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&log, " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: 1.0E-04 |\n", i, 3, 64*i, planned*1000)
	}
	logFile := filepath.Join(dir, "rank0.log")
	if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &out}, ClusterFile: clusterFile, Logs: []string{logFile},
		PlanFile: planFile, NCCLMode: "auto", DryRun: true, Now: func() time.Time { return time.Unix(1.8e9, 0) }}
	if err := Run(opts); err != nil {
		t.Fatalf("calibrate: %v\n%s", err, out.String())
	}
	want := fmt.Sprintf("predicted before: %.4f s (error +0.0%%)", planned)
	if !strings.Contains(out.String(), want) && !strings.Contains(out.String(), strings.Replace(want, "+0.0", "-0.0", 1)) {
		t.Errorf("calibrate priced the run differently from plan (%.4f s); want %q in:\n%s", planned, want, out.String())
	}
}

// When cross-validation keeps only part of the correction, calibrate says
// so and why; when it keeps all of it, or had too few runs to run, the
// note is left out.
func TestPrintCalibrationSaysWhatCrossValidationKept(t *testing.T) {
	run := calib.Run{ObservedS: 14, PredictedS: 12.3, Iterations: 20, Source: "r0.log",
		PartsS: map[string]float64{calib.ComputeFactorKey: 12.3}}
	for _, tc := range []struct {
		name string
		cv   *calib.CrossValidation
		want bool
	}{
		{"runs disagree", &calib.CrossValidation{Folds: 4, Kept: 0.25}, true},
		{"runs agree", &calib.CrossValidation{Folds: 4, Kept: 1}, false},
		{"two runs", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := &calib.Calibration{Compute: calib.Fitted{Factor: 1.01, Observations: 4}, Runs: []calib.Run{run, run, run, run}, CrossValidation: tc.cv}
			var out bytes.Buffer
			printCalibration(&out, "megatron tiny TP1 PP1", run, 12.4, cal)
			got := strings.Contains(out.String(), "(4 folds) supports 25% of the fitted correction, and only that share is applied")
			if got != tc.want {
				t.Errorf("note shown %v, want %v:\n%s", got, tc.want, out.String())
			}
		})
	}
}

// runPinned writes a model and a Megatron log of four 50 ms iterations
// into dir and runs calibrate on clusterFile through the CLI, the run
// pinned as TP1 PP2 DP2 with the flags form (LOG before the flags) plus
// extra; it returns the output.
func runPinned(t *testing.T, dir, clusterFile string, extra ...string) string {
	t.Helper()
	modelFile := filepath.Join(dir, "model.yaml")
	logFile := filepath.Join(dir, "r0.log")
	os.WriteFile(modelFile, []byte(calibrateModel), 0o644)
	var log strings.Builder
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&log, " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: 1.0E-04 |\n", i, 4, 8*i, 50.0)
	}
	os.WriteFile(logFile, []byte(log.String()), 0o644)
	var out, errb bytes.Buffer
	app := &cli.App{Name: "pipette-launch", Commands: []*cli.Command{NewCmd(&cmdutil.IOStreams{Out: &out, ErrOut: &errb})}}
	args := append([]string{"pipette-launch", "calibrate", "--cluster", clusterFile, logFile, "--model", modelFile, "--global-batch-size", "8",
		"--tp", "1", "--pp", "2", "--dp", "2", "--micro-batch-size", "1", "--recompute", "none",
		"--distributed-optimizer=false", "--sequence-parallel", "off", "--no-offload"}, extra...)
	if err := app.Run(args); err != nil {
		t.Fatalf("calibrate %v: %v\n%s%s", args[2:], err, out.String(), errb.String())
	}
	return out.String()
}
