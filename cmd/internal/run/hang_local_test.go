package run

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// TestProgressTimeoutLocally (issue 30, item 2): a real gloo job on this
// machine (2 ranks, examples/torch_elastic.py) that prints its iterations
// and hangs after step 3 is stopped --progress-timeout after its last
// step, with a summary line naming the timeout, instead of hanging
// forever; nothing of it is left.
func TestProgressTimeoutLocally(t *testing.T) {
	dir, mark := localDir(t)
	src, err := os.ReadFile(filepath.Join(cmdtest.Testdata, "..", "..", "..", "examples", "torch_elastic.py"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "torch_elastic.py")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(localLine(t, dir, "--standalone"), "--progress-timeout", "3s",
		script, "--ckpt-dir", t.TempDir(), "--steps", "20", "--step-time", "0.2", "--hang-at-step", "3")
	var out, errOut bytes.Buffer
	start := time.Now()
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	took := time.Since(start)
	o, e := out.String(), errOut.String()
	if code != 1 || !strings.Contains(o, "localhost:0: HANGING at step 3") {
		t.Fatalf("exit %d, want 1 after the job hung\nstdout:\n%s\nstderr:\n%s", code, o, e)
	}
	for _, want := range []string{"stopped as hung: no new step for 3s (--progress-timeout 3s) after step 3",
		"FAILED: interrupted: no new step for 3s"} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr lacks %q\nstderr:\n%s", want, e)
		}
	}
	if took > 90*time.Second {
		t.Errorf("took %s: the hang was not stopped 3s after its last step", took)
	}
	assertNothingLeftHere(t, mark)
	t.Logf("stderr:\n%s", e)
}
