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
	cluster := filepath.Join(t.TempDir(), "h100.yaml")
	spec := "clusters:\n  - name: h100\n    hosts: node01\n    gpus_per_host: 8\n    gpu:\n      model: H100-SXM\n    intra_host:\n      type: nvswitch\n" +
		"    nics:\n      - type: infiniband\n        count: 8\n        rate_gbit_per_s: 400\n    host_memory_gib: 2048\n    cpu_cores: 112\n"
	if err := os.WriteFile(cluster, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	p := prepareCorpusLine(t, "megatron-llama3-8b-fp8")
	dryRun := func(extra ...string) dryRunPlanJSON {
		t.Helper()
		code, stdout, stderr := cmdtest.Run(testApp(nil), append(append([]string{"--dry-run", "--json", "--cluster", cluster}, p.Args...), extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var j dryRunPlanJSON
		if err := json.Unmarshal([]byte(stdout), &j); err != nil {
			t.Fatal(err)
		}
		return j
	}
	j := dryRun()
	m := j.Plan.Memory.Breakdown
	if !j.Plan.FP8ParamGather || !j.Plan.GradReduceBF16 || m.Gradients <= 0 || m.Gradients != m.Weights {
		t.Errorf("plan %+v: want both flags in the plan, and bf16 gradients (2 B/param) equal to FP8 weights without a bf16 copy (2 B/param)", j.Plan)
	}
	ppWarning := fmt.Sprintf("the plan sets --pipeline-model-parallel-size %d, which the script's arguments leave at Megatron's default 1", j.Plan.PP)
	if warned := strings.Contains(strings.Join(j.Warnings, "\n"), ppWarning); warned != (j.Plan.PP > 1) {
		t.Errorf("plan PP %d, warnings %q: a pipeline size the script does not give is named exactly when the plan adds one", j.Plan.PP, j.Warnings)
	}
	if kept := dryRun("--pipeline-model-parallel-size", "1"); kept.Plan.PP != 1 || strings.Contains(strings.Join(kept.Warnings, "\n"), "--pipeline-model-parallel-size") {
		t.Errorf("with --pipeline-model-parallel-size 1: plan PP %d, warnings %q; want PP 1 kept without a warning about it", kept.Plan.PP, kept.Warnings)
	}
}

type dryRunPlanJSON struct {
	Warnings []string `json:"warnings"`
	Plan     struct {
		PP             int  `json:"pp"`
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
