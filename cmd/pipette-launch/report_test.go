package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// `plan --report --svg` writes the page and one parsable SVG per figure,
// and says where on stderr (stdout keeps the table).
func TestPlanReportFlags(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "pipette-launch", Commands: []*cli.Command{newPlanCmd(&IOStreams{Out: &out, ErrOut: &errOut})},
		ExitErrHandler: func(*cli.Context, error) {}}
	page := filepath.Join(dir, "plan.html")
	err := app.Run([]string{"pipette-launch", "plan", "--cluster", "../../examples/two-clusters.yaml", "--model", "gpt3-6.7b",
		"--global-batch-size", "128", "--report", page, "--svg", filepath.Join(dir, "figs")})
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpt3-6.7b on ../../examples/two-clusters.yaml", `id="plan1"`, `id="naive"`, "Why this plan", "<svg "} {
		if !strings.Contains(string(html), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	svgs, _ := filepath.Glob(filepath.Join(dir, "figs", "*.svg"))
	if len(svgs) < 5 {
		t.Fatalf("%d SVG files: %v", len(svgs), svgs)
	}
	for _, f := range svgs {
		data, _ := os.ReadFile(f)
		if err := xml.Unmarshal(data, new(struct{})); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if !strings.Contains(errOut.String(), "report written to "+page) || !strings.Contains(out.String(), "RANK") {
		t.Errorf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	err = app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "256", "--report", filepath.Join(dir, "no", "such", "dir", "x.html")})
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 2 || !strings.Contains(err.Error(), "--report") {
		t.Errorf("unwritable --report: %v, want exit 2 naming --report", err)
	}
}

// run --dry-run and --output-dir draw the plan the job uses; a job in
// torchrun's order has no search to draw and says so.
func TestRunReport(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "dry.html")
	code, out, errOut := runCLI(t, cat([]string{"--dry-run", "--report", page, "--plan", "2", "pretrain_gpt.py"}, gpt48)...)
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
	code, _, errOut = runCLI(t, cat([]string{"--cluster", "../../../examples/cluster.yaml", "--output-dir", filepath.Join(dir, "job"), "--report", filepath.Join(dir, "job.html"), "--svg", filepath.Join(dir, "svg"), "pretrain_gpt.py"}, gpt48)...)
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
