package run

import (
	"context"
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
