package plan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// TestPlansKeepMemoryHeadroom (issue 21): llama3-8b on one 8xH100 host
// ranked first a plan using 79.4 of 79.6 GiB, which real jobs OOM at. By
// default every plan leaves 5% of each GPU free; --memory-headroom 0 gives
// the old ranking, and a value out of range is refused. (Llama 2 13B at a
// global batch of 512: since issue 29's measured activations, llama3-8b's
// best plans stay under 93% at any batch, so they no longer reach the edge.)
func TestPlansKeepMemoryHeadroom(t *testing.T) {
	a100, err := os.ReadFile(filepath.Join("..", "testdata", "a100-16x8.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h100 := strings.NewReplacer("A100-80GB-SXM", "H100-SXM", "node[01-16]", "node01").Replace(string(a100))
	file := filepath.Join(t.TempDir(), "h100.yaml")
	if err := os.WriteFile(file, []byte(h100), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := gpu.Lookup("H100-SXM")
	peaks := func(extra ...string) []float64 {
		code, out, errOut := runAppBuffers(append([]string{"plan", "--cluster", file, "--model", "llama2-13b", "--global-batch-size", "512", "--top", "3", "--json"}, extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var res struct {
			Plans []struct {
				Memory struct {
					Peak float64 `json:"peak_bytes_per_gpu"`
				} `json:"memory"`
			} `json:"plans"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Plans) == 0 {
			t.Fatalf("plan --json: %v\n%s", err, out)
		}
		var p []float64
		for _, pl := range res.Plans {
			p = append(p, pl.Memory.Peak/spec.MemoryBytes())
		}
		return p
	}
	for i, share := range peaks() {
		if share > 0.95 {
			t.Errorf("plan %d uses %.1f%% of the GPU's memory, more than the default 5%% headroom allows", i+1, 100*share)
		}
	}
	if p := peaks("--memory-headroom", "0"); p[0] <= 0.95 {
		t.Errorf("--memory-headroom 0: plan 1 uses %.1f%%; the test's case no longer reaches the edge of memory", 100*p[0])
	}
	if code, _, errOut := runAppBuffers("plan", "--cluster", file, "--model", "llama3-8b", "--global-batch-size", "128", "--memory-headroom", "0.7"); code != 2 || !strings.Contains(errOut, "--memory-headroom: must be a number from 0 to below 0.5, got 0.7") {
		t.Errorf("--memory-headroom 0.7: exit %d, %s", code, errOut)
	}
}

// TestPlanHeaderNamesTheGPU (issue 21): the plan's first line names the
// GPU model each host's resolved to, so a misread model is seen.
func TestPlanHeaderNamesTheGPU(t *testing.T) {
	code, out, errOut := runAppBuffers("plan", "--model", "gpt3-1.3b", "--global-batch-size", "64", "--top", "1")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.Contains(first, "on 32 GPUs (32 A100-80GB-SXM)") {
		t.Errorf("exit %d, first line %q\n%s", code, first, errOut)
	}
}
