package run

import (
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// Inside an allocation (as under salloc), run with --launcher left at auto
// starts the job through srun: every rank gets its torchrun environment,
// and the all-reduce is right, on hosts whose own names do not resolve
// (the launch probe runs through srun too).
func TestRunInsideSallocUsesSrun(t *testing.T) {
	t.Parallel()
	tb, dir, _ := cmdtest.SlurmBed(t, testbed.NamesNone)
	alloc := tb.SlurmAlloc(t, 4)
	var out, errOut syncbuf.Buffer
	args := append([]string{"pipette-launch", "run"}, cmdtest.SlurmJobArgs(dir, 29631)...)
	if code := runAppWith(inAllocation(alloc), args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	cmdtest.CheckAllreduceOutput(t, out.String(), tb.Hosts[0].Addr, []string{"node1", "node2", "node3", "node4"})

	// --dry-run shows the srun step instead of SSH sessions.
	out, errOut = syncbuf.Buffer{}, syncbuf.Buffer{}
	args = append([]string{"pipette-launch", "run", "--dry-run", "--hosts", "node[1-4]"}, cmdtest.SlurmJobArgs(dir, 29631)...)
	if code := runAppWith(inAllocation(alloc), args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "started as one srun step in Slurm job "+alloc["SLURM_JOB_ID"]) ||
		!strings.Contains(out.String(), "--nodelist=node1,node2,node3,node4") {
		t.Errorf("dry run does not show the srun step:\n%s", out.String())
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

// inAllocation adds the variables of Slurm allocation alloc to the
// environment run reads (Options.Env, os.Environ() as it starts), as a
// shell under salloc has them: not through t.Setenv, which is
// process-wide, so the Slurm tests run in parallel with the other
// test-bed tests (run_testbed_test.go).
func inAllocation(alloc map[string]string) func(*Options) {
	return func(o *Options) {
		for k, v := range alloc {
			o.Env = append(o.Env, k+"="+v)
		}
	}
}
