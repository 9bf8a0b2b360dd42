package plan

import (
	"bytes"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/urfave/cli/v2"
)

// `plan --report --svg` writes the page and one parsable SVG per figure,
// and says where on stderr (stdout keeps the table).
func TestPlanReportFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	app := &cli.App{Name: "pipette-launch", Commands: []*cli.Command{NewCmd(&cmdutil.IOStreams{Out: &out, ErrOut: &errOut})},
		ExitErrHandler: func(*cli.Context, error) {}}
	page := filepath.Join(dir, "plan.html")
	err := app.Run([]string{"pipette-launch", "plan", "--cluster", "../../../examples/two-clusters.yaml", "--model", "gpt3-6.7b",
		"--global-batch-size", "128", "--report", page, "--svg", filepath.Join(dir, "figs")})
	if err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpt3-6.7b on ../../../examples/two-clusters.yaml", `id="plan1"`, `id="naive"`, "Why this plan", "<svg "} {
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
