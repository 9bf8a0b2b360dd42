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

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/plan"
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Issue 29: calibrate read every plan file as Megatron-LM's and pinned
// --distributed-optimizer, so a plan from `plan --framework deepspeed
// --zero-stage 0 --json` always failed ("--distributed-optimizer is
// Megatron-LM's; DeepSpeed shards optimizer state with ZeRO"). Every plan
// file plan writes (and run leaves in --log-dir: Megatron, DeepSpeed, torch)
// is calibrated, priced as the plan was.
func TestCalibrateEveryFrameworksPlanFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, framework string
		zero            int
		asTorch         bool // the plan file says framework torch
	}{
		{"megatron", "megatron", -1, false},
		{"deepspeed zero 0", "deepspeed", 0, false},
		{"deepspeed zero 1", "deepspeed", 1, false},
		{"torch", "megatron", -1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clusterFile, modelFile := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "tiny.yaml")
			for p, s := range map[string]string{clusterFile: calibrateCluster, modelFile: calibrateModel} {
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var planOut bytes.Buffer
			po := plan.Options{IO: &cmdutil.IOStreams{Out: &planOut, ErrOut: &planOut}, JSON: true, ClusterFile: clusterFile, Model: modelFile,
				GlobalBatch: 8, Top: 1, Seed: 1, Framework: tc.framework, NCCLMode: "auto",
				Fixed: parallel.Constraints{TP: 1, PP: 2, ZeroStage: tc.zero}}
			if err := plan.Run(&po); err != nil {
				t.Fatalf("plan: %v\n%s", err, planOut.String())
			}
			data := planOut.Bytes()
			if tc.asTorch {
				var doc map[string]any
				if err := json.Unmarshal(data, &doc); err != nil {
					t.Fatal(err)
				}
				doc["plans"].([]any)[0].(map[string]any)["framework"] = string(parallel.FrameworkTorch)
				data, _ = json.Marshal(doc)
			}
			var pj planJSON
			if err := json.Unmarshal(data, &pj); err != nil || len(pj.Plans) == 0 {
				t.Fatalf("plan --json: %v", err)
			}
			planned := pj.Plans[0].Predicted.IterationSeconds
			planFile := filepath.Join(dir, "plan.json")
			if err := os.WriteFile(planFile, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			for i := 1; i <= 3; i++ {
				fmt.Fprintf(&log, " iteration %8d/%8d | consumed samples: %12d | elapsed time per iteration (ms): %.1f | learning rate: 1.0E-04 |\n", i, 3, 8*i, 1200*planned)
			}
			logFile := filepath.Join(dir, "rank0.log")
			if err := os.WriteFile(logFile, []byte(log.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &out}, ClusterFile: clusterFile, Logs: []string{logFile},
				PlanFile: planFile, NCCLMode: "auto", DryRun: true, Now: func() time.Time { return time.Unix(1.8e9, 0) }}
			if err := Run(opts); err != nil {
				t.Fatalf("calibrate on %s's plan: %v\n%s", tc.name, err, out.String())
			}
			// The run is priced as planned: the log's 20% over the plan
			// (to the log's 0.1 ms).
			logged := math.Round(12000*planned) / 10000
			if want := fmt.Sprintf("(error %+.1f%%)", 100*(planned/logged-1)); !strings.Contains(out.String(), "predicted before: "+fmt.Sprintf("%.4f s ", planned)+want) {
				t.Errorf("calibrate priced the run differently from plan (%.4f s):\n%s", planned, out.String())
			}
		})
	}
}

// When the runs disagree beyond their noise, calibrate names the runs
// still off, with their plan and error, and says what to do.
func TestPrintCalibrationNamesDisagreeingRuns(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	mk := func(plan string, pred, obs float64) calib.Run {
		return calib.Run{Plan: plan, At: at, ObservedS: obs, PredictedS: pred, PartsS: map[string]float64{calib.ComputeFactorKey: pred}}
	}
	runs := []calib.Run{mk("deepspeed 39.1B TP2 PP8", 14.33, 21.89), mk("deepspeed 39.1B TP4 PP4", 13.51, 13.88), mk("deepspeed 39.1B TP2 PP16", 15.01, 23.75)}
	cal := &calib.Calibration{Compute: calib.Fitted{Factor: 1, Observations: 3}, Runs: runs,
		CrossValidation: &calib.CrossValidation{Folds: 3, Kept: 0, Disagreeing: []int{0, 2}}}
	var out bytes.Buffer
	printCalibration(&out, runs[2].Plan, runs[2], 15.01, cal)
	for _, want := range []string{"the runs disagree beyond their noise",
		"run 1 (deepspeed 39.1B TP2 PP8, 2026-11-29 01:00): observed 21.8900 s, +53% against the prediction",
		"run 3 (deepspeed 39.1B TP2 PP16, 2026-11-29 01:00): observed 23.7500 s, +58%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "run 2 (") {
		t.Errorf("the agreeing run is named:\n%s", out.String())
	}
}
