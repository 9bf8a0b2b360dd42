package run

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// nvidiaSMIListing is an nvidia-smi that answers -L with n GPUs, in the
// lines of a recorded real answer (as TestNProcPerNodeCountedHere's).
func nvidiaSMIListing(n int) string {
	var rec string
	for i := range n {
		rec += fmt.Sprintf("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-00000000000%d)\n", i, i)
	}
	return "#!/bin/sh\n[ \"$1\" = -L ] && printf '%s' '" + rec + "'\n"
}

// TestLocalHostCheckedAfterAFailure (issue 30, item 2): an elastic job on
// this machine alone checks it after a rank fails, as an SSH job checks
// its hosts: the launch probe's health check, run here. The job's 2 ranks
// run on the 2 GPUs nvidia-smi listed at the start; the first attempt's
// rank 1 fails (rank 0's failure with nothing wrong here is the script's
// own bug, which stops the job), and in one case a GPU has gone
// (nvidia-smi now lists one):
// the machine fails its check and the job stops, naming it, instead of
// restarting onto a missing GPU. With both GPUs still listed the job
// restarts and finishes.
func TestLocalHostCheckedAfterAFailure(t *testing.T) {
	for _, c := range []struct {
		name     string
		gpusLeft int
		wantCode int
		want     string
	}{
		{"a GPU lost", 1, 1, "failed its check: health check: 1 of its 2 GPUs visible (nvidia-smi -L)"},
		{"healthy", 2, 0, "DONE restart 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, mark := localDir(t)
			bin := t.TempDir()
			smi := filepath.Join(bin, "nvidia-smi")
			if err := os.WriteFile(smi, []byte(nvidiaSMIListing(2)), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			// The first attempt's rank 1 fails, after nvidia-smi's answer has
			// become gpusLeft GPUs (the other rank waits for that).
			script := filepath.Join(dir, "fail_once.py")
			src := fmt.Sprintf(`import os, sys, time
restart, rank = os.environ["TORCHELASTIC_RESTART_COUNT"], os.environ["LOCAL_RANK"]
if restart == "0":
    if rank == "1":
        with open(%q + ".new", "w") as f:
            f.write(%q)
        os.chmod(%q + ".new", 0o755)
        os.rename(%q + ".new", %q)
        sys.exit(1)
    time.sleep(60)
print("DONE restart", restart, flush=True)
`, smi, nvidiaSMIListing(c.gpusLeft), smi, smi, smi)
			if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			args := append(localLine(t, dir, "--hosts", "localhost"), "--nnodes", "1:2", "--max-restarts", "2", "--rejoin-interval", "0", script)
			var out, errOut bytes.Buffer
			code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			o, e := out.String(), errOut.String()
			if code != c.wantCode || !strings.Contains(o+e, c.want) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, c.wantCode, c.want, o, e)
			}
			if c.gpusLeft < 2 && strings.Contains(o, "DONE") {
				t.Errorf("the job restarted on the machine that failed its check\nstdout:\n%s", o)
			}
			assertNothingLeftHere(t, mark)
			t.Logf("stderr:\n%s", e)
		})
	}
}
