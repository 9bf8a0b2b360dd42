package plan

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Sailor's Figure 7 row of 80 A100-40GBs (bench/sailor's OPT-350M, fp32):
// the best plan runs on 64 GPUs, and the table, --breakdown and --json say
// which 4 hosts it leaves idle and why; --use-all-gpus plans on all 80.
func TestPlanSaysWhichHostsItLeavesIdle(t *testing.T) {
	file := filepath.Join("..", "testdata", "a100-40-20x4.yaml")
	args := []string{"plan", "--cluster", file, "--model", filepath.Join("..", "..", "..", "bench", "sailor", "opt-350m.yaml"),
		"--global-batch-size", "1024", "--framework", "deepspeed", "--precision", "fp32", "--recompute", "none", "--top", "2"}
	code, out, errOut := runAppBuffers(append(args, "--breakdown")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"plan 1 leaves 16 GPUs idle on 4 hosts (a100-17, a100-18, a100-19, a100-20): faster on 64 of the 80 GPUs",
		"--use-all-gpus plans on every GPU or refuses",
		"16 GPUs on 4 hosts", // the breakdown's IDLE column
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, errOut = runAppBuffers(append(args, "--json")...)
	var res struct {
		Plans []struct {
			DP   int `json:"dp"`
			Idle *struct {
				Hosts  []string `json:"hosts"`
				GPUs   int      `json:"gpus"`
				Reason string   `json:"reason"`
			} `json:"idle"`
		} `json:"plans"`
	}
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || len(res.Plans) == 0 {
		t.Fatalf("--json: exit %d, %v: %s", code, err, errOut)
	}
	if idle := res.Plans[0].Idle; idle == nil || idle.GPUs != 16 || len(idle.Hosts) != 4 || idle.Reason == "" {
		t.Errorf("--json plan 1 idle: %+v", idle)
	}
	code, out, errOut = runAppBuffers(append(args, "--use-all-gpus")...)
	if code != 0 || strings.Contains(out, "idle") {
		t.Errorf("--use-all-gpus: exit %d, %s\n%s", code, errOut, out)
	}
}
