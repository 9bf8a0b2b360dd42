package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlanRefusesOutOfRangeNumberFlags (issue 31): --global-batch-size
// 16777217 was accepted though the limit is 2^24, 4294967296 spun a CPU
// with no output, and --memory-headroom NaN planned ("misses by NaN GiB").
// Each exits 2 at once, naming the flag and the range.
func TestPlanRefusesOutOfRangeNumberFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--global-batch-size", "16777217", "--global-batch-size 16777217: must be 1..16777216, got 16777217"},
		{"--global-batch-size", "4294967296", "--global-batch-size 4294967296: must be 1..16777216, got 4294967296"},
		{"--global-batch-size", "-8", "--global-batch-size -8: must be 1..16777216, got -8"},
		{"--memory-headroom", "NaN", "--memory-headroom: must be a number from 0 to below 0.5, got NaN (not a number)"},
		{"--memory-headroom", "-Inf", "--memory-headroom: must be a number from 0 to below 0.5, got -Inf"},
	} {
		args := []string{"plan", "--model", "gpt3-1.3b", "--global-batch-size", "64", tc.flag, tc.value}
		start := time.Now()
		code, _, errOut := runAppBuffers(args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || time.Since(start) > 30*time.Second {
			t.Errorf("%s %s: exit %d after %s, %q; want exit 2 with %q", tc.flag, tc.value, code, time.Since(start), errOut, tc.want)
		}
	}
}

// TestPlanRefusesNonFiniteClusterNumbers (issue 31): `rate_gbit_per_s:
// .nan` on a NIC ended in "planner: schedule: deadlock ... for a validated
// config"; `memory_gib: 1e308` planned as 17.7/+Inf. plan exits 2 naming
// the field.
func TestPlanRefusesNonFiniteClusterNumbers(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, gpu, nic, want string }{
		{"nan rate", "{model: A100-80GB-SXM}", ".nan", "clusters[0].nics[0].rate_gbit_per_s (line 6, column 58): got .nan; want a finite number"},
		{"huge memory", "{model: A100-80GB-SXM, memory_gib: 1e308}", "200", "clusters[0].gpu.memory_gib (line 5, column 45): must be 0 (not given) or a number from 0.001 to 100000 GiB, got 1e+308"},
	} {
		doc := "clusters:\n  - name: a\n    hosts: n[1-2]\n    gpus_per_host: 8\n    gpu: " + tc.gpu + "\n    nics: [{type: infiniband, count: 8, rate_gbit_per_s: " + tc.nic + "}]\n"
		file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runAppBuffers("plan", "--cluster", file, "--model", "gpt3-1.3b", "--global-batch-size", "64")
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want exit 2 with %q", tc.name, code, errOut, tc.want)
		}
	}
}
