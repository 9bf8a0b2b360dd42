package run

import (
	"strings"
	"testing"
)

// TestRunRefusesOutOfRangeNumberFlags (issue 31): run's --global-batch-size
// and --memory-headroom are checked where they are parsed, as plan's are.
func TestRunRefusesOutOfRangeNumberFlags(t *testing.T) {
	for _, tc := range []struct {
		flag, value, want string
	}{
		{"--global-batch-size", "4294967296", "--global-batch-size 4294967296: must be 1..16777216, got 4294967296"},
		{"--global-batch-size", "0", "--global-batch-size 0: must be 1..16777216, got 0"},
		{"--memory-headroom", "NaN", "--memory-headroom: must be a number from 0 to below 0.5, got NaN (not a number)"},
		{"--preflight-min-share", "NaN", "--preflight-min-share NaN: want a share between 0 and 1"},
	} {
		code, _, errOut := runAppBuffers("run", "--cluster", "../../../examples/cluster.yaml", "--dry-run", "--no-check-script", tc.flag, tc.value, "train.py")
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s %s: exit %d, %q; want exit 2 with %q", tc.flag, tc.value, code, errOut, tc.want)
		}
	}
}
