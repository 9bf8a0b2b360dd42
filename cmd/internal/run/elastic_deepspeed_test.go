package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// dsElasticConfigs are DeepSpeed configs of elastic jobs (4 hosts x 2
// ranks, one host lost: DP 8 -> 6) and what DeepSpeed v0.14.4 makes of
// their checkpoint at DP 6 (planner/deepspeed's CheckReload;
// TestDeepSpeedReloadRules runs the real engine).
var dsElasticConfigs = []struct {
	name, config string
	refused      string // what the stop names; "" when the job restarts on 6 ranks
	batch        string // the restart's layout: the batch DeepSpeed derives at DP 6
}{
	{"ZeRO-1", `{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}`,
		"ZeRO stage 1: DeepSpeed v0.14.4 loads its checkpoint only at the data-parallel size that saved it (DP 8: engine.py", ""},
	{"ZeRO-2 elastic_checkpoint", `{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "elastic_checkpoint": true}}`,
		"ZeRO stage 2: DeepSpeed v0.14.4 loads its checkpoint only", ""},
	{"bf16", `{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}`, "bf16 (its BF16_Optimizer", ""},
	{"ZeRO-1 universal", `{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`,
		"", "DeepSpeed batch 24 = micro 1 x accumulation 4 x DP 6"},
	{"no ZeRO", `{"train_batch_size": 24, "train_micro_batch_size_per_gpu": 1}`, "", "DeepSpeed batch 24 = micro 1 x accumulation 4 x DP 6"},
	{"elasticity, ZeRO-2 universal", `{"elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [1, 2], "version": 0.1},
		"zero_optimization": {"stage": 2}, "checkpoint": {"load_universal": true}}`, "", "DeepSpeed batch 48 = micro 2 x accumulation 4 x DP 6, from its elasticity section"},
}

// TestElasticDeepSpeedRestart (issue 30): an elastic DeepSpeed job whose
// first attempt loses a host restarts on the 6 ranks left only when
// DeepSpeed v0.14.4 can load its checkpoint there (no ZeRO and no bf16, or
// a universal checkpoint), with the batch DeepSpeed derives (an
// elasticity section's: compute_elastic_config's); a ZeRO or bf16
// checkpoint stops the job, saying DeepSpeed's rule and what to do,
// instead of restarting into DeepSpeed's ZeRORuntimeException.
func TestElasticDeepSpeedRestart(t *testing.T) {
	dir := t.TempDir()
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("n1\nn2\nn3\nn4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range dsElasticConfigs {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".json")
			if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var jobs []*job.Job
			f := losesHostFirst("n2", &jobs)
			code, _, errOut := runCLIWith(t, f.adjust, "--nnodes", "3:4", "--max-restarts", "1", "--hostfile", hosts, "--nproc-per-node", "2",
				"--framework", "deepspeed", "--no-check-script", "train.py", "--deepspeed_config", cfg, "--ckpt-dir", "/ckpt")
			if c.refused != "" {
				if code != 1 || len(jobs) != 1 || !strings.Contains(errOut, c.refused) || !strings.Contains(errOut, "ds_to_universal.py") {
					t.Fatalf("exit %d after %d attempts, want 1 after 1, saying %q\n%s", code, len(jobs), c.refused, errOut)
				}
				return
			}
			if code != 0 || len(jobs) != 2 || ranks(jobs[1]) != 6 || !strings.Contains(errOut, c.batch) {
				t.Fatalf("exit %d after %d attempts, want 0 after 2 (6 ranks), the restart's layout saying %q\n%s", code, len(jobs), c.batch, errOut)
			}
		})
	}
}
