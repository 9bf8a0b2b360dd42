package run

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// A plain DeepSpeed script is data-parallel only, and 80 GPUs divide no
// global batch of 1,024: the plan runs on 64 and the job covers exactly
// the 16 hosts it uses, nothing on the 4 it leaves idle (and says so);
// --use-all-gpus refuses instead.
func TestRunStartsNothingOnIdleHosts(t *testing.T) {
	t.Parallel()
	file := filepath.Join("..", "testdata", "a100-40-20x4.yaml")
	args := []string{"--dry-run", "--json", "--cluster", file, "--no-check-script", "--model", "gpt3-125m", "--global-batch-size", "1024", "train.py", "--deepspeed"}
	code, stdout, stderr := runAppBuffers(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	ranks := 0
	for _, h := range got.Hosts {
		if h.Name > "a100-16" {
			t.Errorf("the job starts ranks on %s, which the plan leaves idle", h.Name)
		}
		ranks += len(h.Ranks)
	}
	if len(got.Hosts) != 16 || ranks != 64 || got.Plan == nil || got.Plan.DP != 64 {
		t.Fatalf("job on %d hosts, %d ranks, plan %+v; want 16 hosts, 64 ranks, DP 64", len(got.Hosts), ranks, got.Plan)
	}
	if !strings.Contains(got.Summary, "leaves 16 GPUs on a100-17, a100-18, a100-19, a100-20 idle") || !strings.Contains(got.Summary, "no layout uses all 80 GPUs") {
		t.Errorf("summary does not say which hosts stay idle and why: %s", got.Summary)
	}
	code, _, stderr = runAppBuffers(append([]string{"--use-all-gpus"}, args...)...)
	if code == 0 || !strings.Contains(stderr, "80 GPUs") {
		t.Errorf("--use-all-gpus: exit %d, %s; want a refusal on 80 GPUs", code, stderr)
	}
}
