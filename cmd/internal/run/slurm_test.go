package run

import (
	"fmt"
	"os"
	"os/exec"
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

// TestRunRefusedAsSrunTasks: `srun -N2 pipette-launch run ...` (the per-node
// torchrun habit) runs two copies, each of which would start the whole job:
// under a real srun both refuse, naming the step and their task, and exit 2.
// A one-task step is one copy and is not refused, but warned: its tasks
// see only the step's nodes (SLURM_JOB_NODELIST), so it plans on node1.
func TestRunRefusedAsSrunTasks(t *testing.T) {
	t.Parallel()
	tb, dir, bin := cmdtest.SlurmBed(t, testbed.NamesNone)
	alloc := tb.SlurmAlloc(t, 2)
	srun := func(hosts string, shape ...string) (string, error) {
		line := append([]string{bin, "run", "--dry-run", "--hosts", hosts}, cmdtest.SlurmJobArgs(dir, 29633)...)
		args := append(append([]string{"--jobid=" + alloc["SLURM_JOB_ID"], "--overlap", "--label"}, shape...), line...)
		cmd := exec.Command("srun", args...)
		cmd.Env = append(os.Environ(), tb.SlurmEnv()...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := srun("node[1-2]", "--nodes=2", "--ntasks-per-node=1")
	if err == nil {
		t.Fatalf("two tasks ran the line:\n%s", out)
	}
	for task := range 2 {
		want := fmt.Sprintf("%d: pipette-launch: this is one of 2 tasks of Slurm step %s.", task, alloc["SLURM_JOB_ID"])
		if !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("this is task %d)", task)) {
			t.Errorf("task %d does not refuse (want %q):\n%s", task, want, out)
		}
	}
	if strings.Contains(out, "started as one srun step") {
		t.Errorf("a copy went on to plan the job:\n%s", out)
	}
	out, err = srun("node1", "--nodes=1", "--ntasks=1", "--nodelist=node1")
	if err != nil || !strings.Contains(out, "started as one srun step in Slurm job "+alloc["SLURM_JOB_ID"]) {
		t.Errorf("one task: %v\n%s", err, out)
	}
	// It warns that a step's task sees only the step's nodes.
	if !strings.Contains(out, "warning: running inside Slurm step "+alloc["SLURM_JOB_ID"]+".") || !strings.Contains(out, "(SLURM_JOB_NODELIST=node1)") {
		t.Errorf("one task: no warning that the step's nodes are all it sees:\n%s", out)
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}
