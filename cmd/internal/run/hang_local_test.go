package run

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// TestProgressTimeoutLocally (issue 30, item 2): a real gloo job on this
// machine (2 ranks, examples/torch_elastic.py) that prints its iterations
// and hangs after step 3 is stopped --progress-timeout after its last
// step, with a summary line naming the timeout, instead of hanging
// forever; nothing of it is left.
func TestProgressTimeoutLocally(t *testing.T) {
	dir, mark := localDir(t)
	copyExample(t, dir, "torch_elastic.py")
	script := filepath.Join(dir, "torch_elastic.py")
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

// TestProgressTimeoutRestartsAfterHang: with --max-restarts, a hang is a
// failure like a rank's (ft_launcher's rule), so a job that hangs once at
// step 3 (the first attempt only) is stopped, restarted from its last
// checkpoint (step 2) and finishes; the restart is counted
// (TORCHELASTIC_RESTART_COUNT 1) and said. Without restarts left, a hang
// stops it, as TestProgressTimeoutLocally shows.
func TestProgressTimeoutRestartsAfterHang(t *testing.T) {
	dir, mark := localDir(t)
	copyExample(t, dir, "torch_elastic.py")
	script := filepath.Join(dir, "torch_elastic.py")
	args := append(localLine(t, dir, "--standalone"), "--progress-timeout", "10s", "--max-restarts", "2", "--stop-grace", "2s",
		script, "--ckpt-dir", t.TempDir(), "--steps", "6", "--step-time", "0.2", "--hang-at-step", "3", "--hang-restarts", "1")
	var out, errOut bytes.Buffer
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	o, e := out.String(), errOut.String()
	if code != 0 {
		t.Fatalf("exit %d, want 0: the hang is restarted once and the job finishes\nstdout:\n%s\nstderr:\n%s", code, o, e)
	}
	for _, want := range []string{"localhost:0: HANGING at step 3", "localhost:0: RESUMED from step 2 world 2 restart 1", "localhost:0: DONE step 6"} {
		if !strings.Contains(o, want) {
			t.Errorf("stdout lacks %q\nstdout:\n%s", want, o)
		}
	}
	for _, want := range []string{"stopped as hung: no new step for 10s", "restarting the whole job after the hang (restart 1 of 2)"} {
		if !strings.Contains(e, want) {
			t.Errorf("stderr lacks %q\nstderr:\n%s", want, e)
		}
	}
	if strings.Count(e, "stopped as hung") != 1 || strings.Contains(e, "restart 2 of 2") {
		t.Errorf("want exactly one hang and one restart (the job's exit after its last step is no hang)\nstderr:\n%s", e)
	}
	assertNothingLeftHere(t, mark)
	t.Logf("stderr:\n%s", e)
}
