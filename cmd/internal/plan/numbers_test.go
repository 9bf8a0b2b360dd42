package plan

import (
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
