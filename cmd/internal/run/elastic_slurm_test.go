package run

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// TestElasticInsideSlurmAllocation (issue 30): an elastic job inside a
// Slurm allocation of 4 nodes made with --no-kill (as pipette-launch
// sbatch asks for an elastic line), started through srun. node2 is killed
// (its network cut) once step 4 is saved: Slurm finds it not responding,
// the job is stopped, node2 is left out of the next srun step, and the
// job resumes from its checkpoint on node1, node3 and node4 and finishes.
func TestElasticInsideSlurmAllocation(t *testing.T) {
	t.Parallel()
	tb, dir, _ := cmdtest.SlurmBed(t, testbed.NamesResolve)
	copyExample(t, dir, "torch_elastic.py")
	alloc := tb.SlurmAllocWith(t, 4, "--no-kill")
	ckpt, err := os.MkdirTemp(dir, "ckpt-")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"pipette-launch", "run", "--nnodes", "2:4", "--max-restarts", "2", "--nproc-per-node", "2", "--framework", "torch",
		"--python", cmdtest.BedPython, "--workdir", dir, "--stop-grace", "3s", "--master-port", "29641",
		filepath.Join(dir, "torch_elastic.py"), "--ckpt-dir", ckpt, "--steps", "16", "--step-time", "0.5", "--timeout", "300"}
	var out, errOut syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cut := cutOnce(ctx, t, tb, &out, "SAVED step 4\n", "node2")
	code := runAppWith(inAllocation(alloc), args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cancel()
	wasCut := <-cut
	if err := tb.LinkUp("node2"); err != nil {
		t.Error(err)
	}
	o, e := out.String(), errOut.String()
	t.Logf("stdout:\n%s\nstderr:\n%s", o, e)
	if !wasCut || code != 0 {
		t.Fatalf("exit %d (cut: %v)", code, wasCut)
	}
	resumed := regexp.MustCompile(`node[134]:\d: RESUMED from step (\d+) world 6 restart 1`).FindAllStringSubmatch(o, -1)
	if step, _ := strconv.Atoi(firstMatch(resumed)); len(resumed) != 6 || step < 4 {
		t.Errorf("want 6 ranks resumed at step >= 4 on 6 ranks, got %v", resumed)
	}
	if n := strings.Count(o, "DONE step 16 w 16 world 6"); n != 6 {
		t.Errorf("%d ranks report DONE step 16 w 16 world 6, want 6", n)
	}
	for _, w := range []string{"finished on 3 hosts after 1 restart", "attempt 2 (restart 1): 3 hosts: node1 node3 node4",
		"dropped    : node2", "blamed     : node2 lost"} {
		if !strings.Contains(e, w) && !strings.Contains(o, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	// node2's ranks, cut off, are Slurm's to end once it is back, and its
	// agent's: it stops them itself once its heartbeat times out (30 s by
	// default) and the 3 s grace has passed. A CI run (14a5308) found that
	// stop still under way when Slurm's steps were gone; a minute bounds it.
	tb.WaitSlurmStepsGone(90 * time.Second)
	tb.WaitNothingLeft(time.Minute)
	tb.AssertNothingLeft(t)
}
