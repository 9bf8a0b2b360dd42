package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestNothingInjected (issue 21): a script that hands DeepSpeed its config
// itself gets no --deepspeed_config (HF Trainer's --deepspeed FILE, read as
// the user's config; --deepscale_config; a script that passes config= to
// deepspeed.initialize), and --local_rank=N is passed only where
// DeepSpeed's launcher passes it, never on a torchrun line.
func TestNothingInjected(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("hf_ds.json", `{"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", "gradient_accumulation_steps": "auto",
 "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": "auto"}}`)
	write("ds.json", `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}`)
	write("train.py", "import deepspeed\n")
	write("chat.py", "import deepspeed\nengine, *_ = deepspeed.initialize(model=m, args=args, config=ds_config, lr_scheduler=get(x))\n")
	write("cluster.yaml", mustRead(t, filepath.Join(testdataDir, "mixed-ib-ethernet.yaml")))
	for _, tc := range []struct {
		name      string
		args      []string // launcher flags and the script
		user      []string // the script's arguments
		localRank bool
		noFiles   bool
	}{
		{"HF --deepspeed FILE, DeepSpeed's launcher", []string{"--hosts", "localhost", "train.py"}, []string{"--deepspeed", "hf_ds.json", "--per_device_train_batch_size", "4"}, true, true},
		{"HF --deepspeed=FILE, torchrun", []string{"--hosts", "localhost", "--nproc_per_node", "2", "train.py"}, []string{"--deepspeed=hf_ds.json", "--bf16"}, false, true},
		{"--deepscale_config", []string{"--hosts", "localhost", "--nproc_per_node", "2", "train.py"}, []string{"--deepspeed", "--deepscale_config", "ds.json"}, false, true},
		{"script passes config=, planned", []string{"--cluster", "cluster.yaml", "--num_nodes", "1", "--num_gpus", "2", "chat.py"}, []string{"--deepspeed", "--zero_stage", "2"}, true, false},
		{"no config, DeepSpeed's launcher", []string{"--num_gpus", "2", "train.py"}, []string{"--deepspeed"}, true, true},
		{"torchrun line", []string{"--nproc_per_node", "2", "train.py"}, []string{"--deepspeed", "--deepspeed_config", "ds.json"}, false, true},
		{"DeepSpeed launcher flag, torch script", []string{"--num_gpus", "2", "train.py"}, []string{"--lr", "1"}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *job.Job
			f := &fakes{probe: noProbe, launch: func(_ context.Context, j *job.Job, _ *Options) error {
				got = j
				return nil
			}}
			code, _, errOut := runCLIAtWith(t, f.adjust, dir, append(append([]string{"--no-check-script"}, tc.args...), tc.user...)...)
			if code != 0 || got == nil {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, h := range got.Hosts {
				for _, r := range h.Ranks {
					i := slices.IndexFunc(r.Argv, func(a string) bool { return strings.HasSuffix(a, ".py") })
					rest := r.Argv[i+1:]
					if tc.localRank {
						if len(rest) == 0 || rest[0] != "--local_rank="+strconv.Itoa(r.LocalRank) {
							t.Fatalf("rank %d: want --local_rank=%d right after the script: %q", r.Rank, r.LocalRank, r.Argv)
						}
						rest = rest[1:]
					}
					if !slices.Equal(rest, tc.user) {
						t.Fatalf("rank %d gets %q, want the script's own arguments %q", r.Rank, rest, tc.user)
					}
				}
			}
			for _, fl := range got.Files {
				if fl.Path == "ds_config.json" {
					t.Errorf("a ds_config.json was written although the script gives DeepSpeed its config")
				}
			}
		})
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHFTrainerBatchPlanned (issue 21, conformance): an HF Trainer config
// with "auto" batch values runs with the batch the Trainer fills from its
// own arguments; the plan must report that batch, not micro 1.
func TestHFTrainerBatchPlanned(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hf_ds.json"), []byte(`{"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
 "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hf_gas2.json"), []byte(`{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name               string
		args               []string
		micro, global, gas int
		wantErr            string
	}{
		{"per-device 16, accumulation 2", []string{"--per_device_train_batch_size", "16", "--gradient_accumulation_steps", "2"}, 16, 16 * 2 * 4, 2, ""},
		{"HF defaults: per-device 8", []string{"--bf16"}, 8, 8 * 4, 1, ""},
		{"dashed spelling, = form, last wins", []string{"--per-device-train-batch-size=2", "--per_device_train_batch_size=4", "--gradient-accumulation-steps=3"}, 4, 4 * 3 * 4, 3, ""},
		{"not a number", []string{"--per_device_train_batch_size", "x"}, 0, 0, 0, "HF Trainer wants a positive integer"},
		{"config's accumulation 2, the Trainer's 1", []string{"--deepspeed", "hf_gas2.json"}, 0, 0, 0, "a mismatch HF Trainer refuses"},
		{"config's accumulation 2, the Trainer's 2", []string{"--deepspeed", "hf_gas2.json", "--gradient_accumulation_steps", "2"}, 8, 8 * 2 * 4, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--dry-run", "--json", "--no-check-script", "--standalone", "--nproc-per-node", "4", "train.py"}
			if !slices.Contains(tc.args, "--deepspeed") {
				args = append(args, "--deepspeed", "hf_ds.json")
			}
			args = append(args, tc.args...)
			code, stdout, stderr := runCLIAt(t, dir, args...)
			if tc.wantErr != "" {
				if code == 0 || !strings.Contains(stderr, tc.wantErr) {
					t.Fatalf("exit %d, want an error naming %s: %s", code, tc.wantErr, stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got dryRunJSON
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || got.Plan == nil {
				t.Fatalf("dry run's JSON: %v, plan %v", err, got.Plan)
			}
			p := got.Plan
			if p.MicroBatch != tc.micro || p.GlobalBatch != tc.global || p.GlobalBatch/(p.MicroBatch*p.DP) != tc.gas {
				t.Errorf("plan: micro %d, global %d, DP %d; HF Trainer runs micro %d, global %d (accumulation %d)", p.MicroBatch, p.GlobalBatch, p.DP, tc.micro, tc.global, tc.gas)
			}
		})
	}
}
