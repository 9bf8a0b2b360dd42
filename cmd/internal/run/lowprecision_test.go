package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// Megatron-LM's train_llama3_8b_h100_fp8.sh planned on a cluster file of
// one 8 x H100 host. Its --fp8-param-gather and --grad-reduce-in-bf16 are
// priced (FP8 weights without a bf16 copy: 2 B/param; bf16 gradient
// buffers: 2 B/param, not fp32's 4), and a pipeline size the script leaves
// at Megatron's default is never added without a word: with
// --pipeline-model-parallel-size 1 among the script's arguments the plan
// keeps it.
func TestLlama3FP8LinePricesItsLowPrecisionFlags(t *testing.T) {
	dryRun := prepareLlama3FP8(t).dryRun
	j := dryRun(nil)
	m := j.Plan.Memory.Breakdown
	if !j.Plan.FP8ParamGather || !j.Plan.GradReduceBF16 || m.Gradients <= 0 || m.Gradients != m.Weights {
		t.Errorf("plan %+v: want both flags in the plan, and bf16 gradients (2 B/param) equal to FP8 weights without a bf16 copy (2 B/param)", j.Plan)
	}
	ppWarning := fmt.Sprintf("the plan sets --pipeline-model-parallel-size %d, which the script's arguments leave at Megatron's default 1", j.Plan.PP)
	if warned := strings.Contains(strings.Join(j.Warnings, "\n"), ppWarning); warned != (j.Plan.PP > 1) {
		t.Errorf("plan PP %d, warnings %q: a pipeline size the script does not give is named exactly when the plan adds one", j.Plan.PP, j.Warnings)
	}
	if kept := dryRun(nil, "--pipeline-model-parallel-size", "1"); kept.Plan.PP != 1 || strings.Contains(strings.Join(kept.Warnings, "\n"), "--pipeline-model-parallel-size") {
		t.Errorf("with --pipeline-model-parallel-size 1: plan PP %d, warnings %q; want PP 1 kept without a warning about it", kept.Plan.PP, kept.Warnings)
	}
}

// The same script at PP 1 does not fit by the estimate as written (82.6
// GiB per GPU: TestMemoryValidation's llama3-8b-fp8-script row, 14.96 GiB
// FP8 weights + 14.96 bf16 gradients + 11.22 sharded optimizer + 37.50
// activations + the 4.00 allowance). The plan then turns on what the
// script leaves off, first the optimizer's CPU offload, and the launch
// names it with that figure and the pin that keeps the script's setting;
// with --no-offload it turns on full recompute and says so; with both
// pins nothing fits, and run exits 3 as plan does.
func TestRunSaysWhatThePlanTurnsOn(t *testing.T) {
	line := prepareLlama3FP8(t)
	dryRun := line.dryRun
	pp1 := []string{"--pipeline-model-parallel-size", "1"}
	offload := dryRun(nil, pp1...)
	if offload.Plan.Offload.OptimizerFraction != 1 || offload.Plan.Recompute != "none" {
		t.Fatalf("plan %+v: want the optimizer offloaded and nothing recomputed (the cases below rest on it)", offload.Plan)
	}
	want := "the plan turns on the optimizer's CPU offload (--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction 1 --overlap-cpu-optimizer-d2h-h2d), " +
		"which the script's arguments leave off: without it, this layout needs 82.6 GiB per GPU by the estimate, over the"
	if w := strings.Join(offload.Warnings, "\n"); !strings.Contains(w, want) || !strings.Contains(w, "pass --no-offload to pipette-launch") {
		t.Errorf("warnings %q\nlack %q and the pin --no-offload", offload.Warnings, want)
	}
	recompute := dryRun([]string{"--no-offload"}, pp1...)
	if recompute.Plan.Offload.OptimizerFraction != 0 || recompute.Plan.Recompute != "full" {
		t.Fatalf("with --no-offload: plan %+v, want full recompute and no offload", recompute.Plan)
	}
	if w := strings.Join(recompute.Warnings, "\n"); !strings.Contains(w, "the plan turns on full recompute") || !strings.Contains(w, "needs 82.6 GiB per GPU") ||
		!strings.Contains(w, "pass --recompute none to pipette-launch") || strings.Contains(w, "CPU offload") {
		t.Errorf("with --no-offload: warnings %q, want full recompute named with the 82.6 GiB and --recompute none, and no offload", recompute.Warnings)
	}
	for _, tc := range []struct {
		flags  []string
		code   int
		stderr string
	}{
		{[]string{"--no-offload", "--recompute", "none"}, 3, "no configuration of megatron-args fits on 8 GPUs"},
		{[]string{"--no-offload", "--offload"}, 2, "--no-offload and --offload contradict each other: give one"},
		{[]string{"--recompute", "none", "--distributed-optimizer=false"}, 2, "--distributed-optimizer=false contradicts the script's --use-distributed-optimizer"},
	} {
		code, _, stderr := line.run(tc.flags, pp1...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d saying %q", tc.flags, code, stderr, tc.code, tc.stderr)
		}
	}
}

// llama3FP8Line is Megatron-LM's train_llama3_8b_h100_fp8.sh prepared
// (prepareCorpusLine) with a cluster file of one 8 x H100 host.
type llama3FP8Line struct {
	t       *testing.T
	cluster string
	args    []string
}

func prepareLlama3FP8(t *testing.T) llama3FP8Line {
	t.Helper()
	cluster := filepath.Join(t.TempDir(), "h100.yaml")
	spec := "clusters:\n  - name: h100\n    hosts: node01\n    gpus_per_host: 8\n    gpu:\n      model: H100-SXM\n    intra_host:\n      type: nvswitch\n" +
		"    nics:\n      - type: infiniband\n        count: 8\n        rate_gbit_per_s: 400\n    host_memory_gib: 2048\n    cpu_cores: 112\n"
	if err := os.WriteFile(cluster, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return llama3FP8Line{t: t, cluster: cluster, args: prepareCorpusLine(t, "megatron-llama3-8b-fp8").Args}
}

// run is its dry run as it exits, with run's own flags before the line
// and more script arguments after it.
func (l llama3FP8Line) run(runFlags []string, scriptExtra ...string) (int, string, string) {
	args := append(append([]string{"--dry-run", "--cluster", l.cluster}, runFlags...), l.args...)
	return cmdtest.Run(testApp(nil), append(args, scriptExtra...)...)
}

// dryRun is run's JSON, which must succeed.
func (l llama3FP8Line) dryRun(runFlags []string, scriptExtra ...string) dryRunPlanJSON {
	l.t.Helper()
	code, stdout, stderr := l.run(append([]string{"--json"}, runFlags...), scriptExtra...)
	if code != 0 {
		l.t.Fatalf("exit %d: %s", code, stderr)
	}
	var j dryRunPlanJSON
	if err := json.Unmarshal([]byte(stdout), &j); err != nil {
		l.t.Fatal(err)
	}
	return j
}

type dryRunPlanJSON struct {
	Warnings []string `json:"warnings"`
	Plan     struct {
		PP        int    `json:"pp"`
		Recompute string `json:"recompute"`
		Offload   struct {
			OptimizerFraction float64 `json:"optimizer_fraction"`
		} `json:"offload"`
		FP8ParamGather bool `json:"fp8_param_gather"`
		GradReduceBF16 bool `json:"grad_reduce_in_bf16"`
		Memory         struct {
			Breakdown struct {
				Weights   float64 `json:"weights"`
				Gradients float64 `json:"gradients"`
			} `json:"breakdown_bytes"`
		} `json:"memory"`
	} `json:"plan"`
}
