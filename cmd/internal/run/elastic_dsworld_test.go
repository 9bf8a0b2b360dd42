package run

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/dskit"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// dsWorldSection is an elasticity section (version 0.1) whose valid GPU
// counts stop below 8: 4 hosts x 2 ranks is not a world size it accepts.
const dsWorldSection = `{"enabled": true, "max_train_batch_size": 100, "micro_batch_sizes": [3, 5], "min_gpus": 2, "max_gpus": 8, "prefer_larger_batch": false, "version": 0.1}`

// kitValidGPUs is the list of valid GPU counts DeepSpeed v0.14.4's own
// compute_elastic_config gives section, run from the framework kit (make
// deps sets it up; the test fails without it).
func kitValidGPUs(t *testing.T, section string) []int {
	t.Helper()
	kit, err := dskit.Find()
	if err != nil {
		t.Fatalf("%v; make deps sets the kits up", err)
	}
	cmd := exec.Command(kit.Python, "-c", `import json, sys
from deepspeed.elasticity import compute_elastic_config
final, valid = compute_elastic_config({"elasticity": json.loads(sys.argv[1])}, "0.14.4")
print(json.dumps([int(v) for v in valid]))`, section)
	cmd.Env = append(os.Environ(), kit.Env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compute_elastic_config from the kit: %v\n%s", err, out)
	}
	var valid []int
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &valid); err != nil {
		t.Fatalf("the kit's answer %q: %v", out, err)
	}
	return valid
}

// TestElasticityLeavesHostsOut (issue 30): when DeepSpeed's elasticity
// section does not accept the world size of every host an attempt may use,
// the job runs on fewer: the largest size of the kit's own valid GPU list
// that at least MIN hosts reach, the first hosts kept, the others named
// idle and why; with none of at least MIN hosts it stops saying so. The
// restart after a loss takes an idle host in when that makes a valid size.
func TestElasticityLeavesHostsOut(t *testing.T) {
	valid := kitValidGPUs(t, dsWorldSection)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ds.json")
	if err := os.WriteFile(cfg, []byte(`{"elasticity": `+dsWorldSection+`, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hosts, nnodes string
		n, perHost    int
	}{
		{"n[1-4]", "2:4", 4, 2},
		{"n[1-8]", "2:8", 8, 1},
		{"n[1-5]", "4:5", 5, 2}, // 4 hosts of 2 ranks make 8 at least: none valid
	} {
		t.Run(c.hosts+"x"+fmt.Sprint(c.perHost), func(t *testing.T) {
			var lo int // MIN
			fmt.Sscanf(c.nnodes, "%d:", &lo)
			if slices.Contains(valid, c.n*c.perHost) {
				t.Fatalf("the kit accepts all %d ranks (%v): the case tests nothing", c.n*c.perHost, valid)
			}
			want := 0 // hosts kept: the largest valid size of whole hosts, at least MIN
			for k := c.n - 1; k >= lo && want == 0; k-- {
				if slices.Contains(valid, k*c.perHost) {
					want = k
				}
			}
			code, out, errOut := runCLI(t, "--dry-run", "--nnodes", c.nnodes, "--hosts", c.hosts, "--nproc-per-node", fmt.Sprint(c.perHost),
				"--framework", "deepspeed", "--no-check-script", "train.py", "--deepspeed_config", cfg, "--ckpt", "/c")
			if want == 0 {
				if code == 0 || !strings.Contains(errOut, "no world size it accepts is left with at least MIN") || !strings.Contains(errOut, fmt.Sprint(valid)) {
					t.Errorf("exit %d: want the job refused, naming the valid sizes %v\n%s", code, valid, errOut)
				}
				return
			}
			var idle []string
			for i := want + 1; i <= c.n; i++ {
				idle = append(idle, fmt.Sprintf("n%d", i))
			}
			head := fmt.Sprintf("# torchrun rank order (no planning): %d ranks on %d host(s), TP 1 PP 1 CP 1 DP %d; leaves %s idle: DeepSpeed's elasticity section accepts world sizes %v, not the %d of all %d hosts\n",
				want*c.perHost, want, want*c.perHost, strings.Join(idle, ", "), valid, c.n*c.perHost, c.n)
			if code != 0 || !strings.Contains(out, head) || strings.Count(out, " lost: restarts on ") != want {
				t.Errorf("exit %d: want %q and a restart after each of %d losses\n%s\n%s", code, head, want, out, errOut)
			}
		})
	}

	t.Run("a loss takes the idle host in", func(t *testing.T) {
		var jobs []*job.Job
		f := losesHostFirst("n2", &jobs)
		code, _, errOut := runCLIWith(t, f.adjust, "--nnodes", "2:4", "--max-restarts", "1", "--hosts", "n[1-4]", "--nproc-per-node", "2",
			"--framework", "deepspeed", "--no-check-script", "train.py", "--deepspeed_config", cfg, "--ckpt", "/c")
		if code != 0 || len(jobs) != 2 {
			t.Fatalf("exit %d after %d attempts, want 0 after 2\n%s", code, len(jobs), errOut)
		}
		for i, want := range []string{"[n1 n2 n3]", "[n1 n3 n4]"} {
			var hosts []string
			for _, h := range jobs[i].Hosts {
				hosts = append(hosts, h.Name)
			}
			if fmt.Sprint(hosts) != want {
				t.Errorf("attempt %d on %v, want %s\n%s", i+1, hosts, want, errOut)
			}
		}
	})
}
