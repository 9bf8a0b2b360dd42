package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// run --dry-run and --output-dir draw the plan the job uses; a job in
// torchrun's order has no search to draw and says so.
func TestRunReport(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "dry.html")
	code, out, errOut := runCLI(t, cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "--report", page, "--plan", "2", "pretrain_gpt.py"}, gpt48)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "plan 2 (chosen)") || !strings.Contains(out, "# ") {
		t.Errorf("--plan 2 report does not lead with plan 2, or the dry run printed nothing")
	}
	// --output-dir needs real hosts (never the embedded example's): the
	// example's own file stands in for them.
	code, _, errOut = runCLI(t, cmdtest.Cat([]string{"--cluster", "../../../examples/cluster.yaml", "--output-dir", filepath.Join(dir, "job"), "--report", filepath.Join(dir, "job.html"), "--svg", filepath.Join(dir, "svg"), "pretrain_gpt.py"}, gpt48)...)
	if code != 0 {
		t.Fatalf("--output-dir: exit %d: %s", code, errOut)
	}
	for _, p := range []string{filepath.Join(dir, "job.html"), filepath.Join(dir, "svg", "plan1-timeline.svg")} {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	code, _, errOut = runCLI(t, "--dry-run", "--hosts", "n1", "--report", filepath.Join(dir, "x.html"), "train.py")
	if code != 2 || !strings.Contains(errOut, "draw a planned job") {
		t.Errorf("--hosts --report: exit %d, %s", code, errOut)
	}
}
