package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// megatronLine is a Megatron-LM pretrain_gpt.py line (tiny shape) for
// --dry-run on the embedded example cluster.
var megatronLine = []string{"pretrain_gpt.py", "--num-layers", "2", "--hidden-size", "256", "--num-attention-heads", "4",
	"--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "8",
	"--vocab-size", "1024", "--bf16"}

type dryRunJSON struct {
	Summary string `json:"summary"`
	Hosts   []struct {
		Name     string `json:"name"`
		Address  string `json:"address"`
		NodeRank int    `json:"node_rank"`
		Ranks    []struct {
			Rank      int      `json:"rank"`
			LocalRank int      `json:"local_rank"`
			Argv      []string `json:"argv"`
			Env       []struct {
				Name, Value string
			} `json:"env"`
		} `json:"ranks"`
	} `json:"hosts"`
	Files []struct {
		Path    string `json:"path"`
		Mode    uint32 `json:"mode"`
		Content string `json:"content"`
	} `json:"files"`
	Plan *struct {
		TP int `json:"tp"`
		PP int `json:"pp"`
		DP int `json:"dp"`
		EP int `json:"ep"`

		MicroBatch  int `json:"micro_batch_size"`
		GlobalBatch int `json:"global_batch_size"`
	} `json:"plan"`
}

// --dry-run --json prints one JSON object with every rank, secrets masked
// as the text form masks them, and the plan the ranks' arguments follow.
func TestDryRunJSON(t *testing.T) {
	t.Parallel()
	secrets := []string{"--env", "HF_TOKEN=hf_s3cr3t", "--env", "WANDB_API_KEY=wandb_s3cr3t", "--env", "MY_VISIBLE=plain"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bare form", append(append([]string{"--dry-run", "--json", "--cluster", "example", "--no-check-script"}, secrets...), megatronLine...)},
		{"run with value flags before --json", append(append([]string{"run", "--cluster", "../../../examples/cluster.yaml", "--dry-run", "--no-check-script"}, secrets...), append([]string{"--json"}, megatronLine...)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAppBuffers(tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got dryRunJSON
			dec := json.NewDecoder(strings.NewReader(stdout))
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if dec.More() {
				t.Fatalf("stdout holds more than one JSON object:\n%s", stdout)
			}
			if !strings.HasPrefix(got.Summary, "plan 1 of") || got.Plan == nil || got.Plan.TP < 1 || len(got.Hosts) == 0 {
				t.Fatalf("summary %q, plan %+v, %d hosts", got.Summary, got.Plan, len(got.Hosts))
			}
			if strings.Contains(stdout, "s3cr3t") {
				t.Fatalf("a secret reached stdout:\n%s", stdout)
			}
			ranks := 0
			for i, h := range got.Hosts {
				if h.NodeRank != i || h.Name == "" || h.Address == "" {
					t.Errorf("host %d: %+v", i, h)
				}
				for _, r := range h.Ranks {
					ranks++
					env := map[string]string{}
					for _, e := range r.Env {
						env[e.Name] = e.Value
					}
					if env["HF_TOKEN"] != "****" || env["WANDB_API_KEY"] != "****" || env["MY_VISIBLE"] != "plain" {
						t.Fatalf("rank %d env: HF_TOKEN=%q WANDB_API_KEY=%q MY_VISIBLE=%q", r.Rank, env["HF_TOKEN"], env["WANDB_API_KEY"], env["MY_VISIBLE"])
					}
					if env["RANK"] != itoa(r.Rank) || env["LOCAL_RANK"] != itoa(r.LocalRank) {
						t.Fatalf("rank %d: RANK=%q LOCAL_RANK=%q", r.Rank, env["RANK"], env["LOCAL_RANK"])
					}
					i := slices.Index(r.Argv, "--tensor-model-parallel-size")
					if i < 0 || r.Argv[i+1] != itoa(got.Plan.TP) {
						t.Fatalf("rank %d argv %q does not follow the plan's TP %d", r.Rank, r.Argv, got.Plan.TP)
					}
				}
			}
			if ranks != got.Plan.TP*got.Plan.PP*got.Plan.DP {
				t.Errorf("%d ranks, plan TP*PP*DP = %d", ranks, got.Plan.TP*got.Plan.PP*got.Plan.DP)
			}
			// The text form masks the same way.
			textArgs := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return a == "--json" })
			code, text, stderr := runAppBuffers(textArgs...)
			if code != 0 || !strings.Contains(text, "HF_TOKEN=****") || strings.Contains(text, "s3cr3t") {
				t.Fatalf("text --dry-run: exit %d, masked %v: %s", code, strings.Contains(text, "HF_TOKEN=****"), stderr)
			}
		})
	}
}

func itoa(n int) string { return jsonInt(n) }

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// DeepSpeed jobs carry files (ds_config.json, hostfile): --json gives
// their content as text.
func TestDryRunJSONFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ds_config.json")
	if err := os.WriteFile(cfg, []byte(`{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAppBuffers("--dry-run", "--json", "--cluster", "example", "--no-check-script", "--model", "gpt3-125m",
		"train.py", "--deepspeed", "--deepspeed_config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(got.Files) == 0 {
		t.Fatalf("no files in a DeepSpeed job:\n%s", stdout)
	}
	for _, f := range got.Files {
		if f.Path == "" || f.Mode == 0 || f.Content == "" {
			t.Errorf("file %+v", f)
		}
		if strings.HasSuffix(f.Path, ".json") && !json.Valid([]byte(f.Content)) {
			t.Errorf("%s is not JSON text: %q", f.Path, f.Content)
		}
	}
}

// runAppBuffers runs run's CLI where the test is (no change of directory
// or environment).
func runAppBuffers(args ...string) (code int, stdout, stderr string) {
	return cmdtest.Run(testApp(nil), args...)
}
