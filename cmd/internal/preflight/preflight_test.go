package preflight

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// pipette-launch preflight --dry-run prints the preflight's own job (each
// rank runs pipette_preflight.py on the groups' spec), never the training
// script, which it used to print; --output-dir, which used to write scripts
// that start the training job, is refused and writes nothing: the verdict
// is judged from every rank's reports as they run.
func TestPreflightDryRunIsThePreflight(t *testing.T) {
	t.Chdir(t.TempDir())
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		io := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
		base := []string{"pipette-launch", "preflight", "--hosts", "n1,n2", "--nproc-per-node", "2", "--no-check-script"}
		code := runApp(append(append(base, args...), "train.py", "--lr", "1"), io)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := cli("--dry-run")
	if code != 0 {
		t.Fatalf("--dry-run: exit %d: %s", code, errOut)
	}
	// Each host's command of every rank, once per host.
	cmds := regexp.MustCompile(`(?m)^  python3 -u .*$`).FindAllString(out, -1)
	if len(cmds) != 2 || strings.Contains(out, "train.py") || !strings.Contains(out, "# preflight of ") {
		t.Errorf("--dry-run printed:\n%s\nwant both hosts' ranks running pipette_preflight.py and no train.py", out)
	}
	for _, c := range cmds {
		if !strings.Contains(c, "/pipette_preflight.py /") {
			t.Errorf("rank command %q: want pipette_preflight.py on the groups' spec", c)
		}
	}
	od := filepath.Join(t.TempDir(), "od")
	code, out, errOut = cli("--output-dir", od)
	if code != 2 || !strings.Contains(errOut, "preflight --output-dir: the preflight's verdict is pipette-launch's") || out != "" {
		t.Errorf("--output-dir: exit %d, stdout %q, stderr %q; want exit 2 saying why", code, out, errOut)
	}
	if _, err := os.Lstat(od); err == nil {
		t.Errorf("--output-dir %s was written", od)
	}
}

// run --preflight --dry-run shows the job and says a preflight runs
// before it, and where to see that job.
func TestRunPreflightDryRunSaysSo(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	io := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := runApp([]string{"pipette-launch", "run", "--preflight", "--dry-run", "--hosts", "n1", "--nproc-per-node", "2", "--no-check-script", "train.py"}, io)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "# --preflight: before the job, a collective test through its environment (pipette-launch preflight --dry-run shows that job)") ||
		!strings.Contains(out.String(), "python3 -u train.py") {
		t.Errorf("dry run printed:\n%s\nwant the job and the preflight's note", out.String())
	}
}
