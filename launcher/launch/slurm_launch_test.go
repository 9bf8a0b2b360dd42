package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// slurmBed is a test-bed of n hosts running real Slurm, and an allocation of
// all of them, as a job inside `salloc -N n` sees it.
func slurmBed(t *testing.T, n int) (*testbed.Testbed, remote.Slurm) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s missing: install the Debian package python3-torch", python)
	}
	spec := testbed.Spec{Slurm: true}
	for i := 1; i <= n; i++ {
		spec.Hosts = append(spec.Hosts, testbed.HostSpec{Name: fmt.Sprintf("node%d", i)})
	}
	tb := testbed.New(t, spec)
	alloc := tb.SlurmAlloc(t, n)
	return tb, remote.Slurm{JobID: alloc["SLURM_JOB_ID"], Env: append(os.Environ(), "SLURM_CONF="+alloc["SLURM_CONF"])}
}

// slurmSteps lists the allocation's running steps.
func slurmSteps(t *testing.T, s remote.Slurm) string {
	t.Helper()
	c := exec.Command("squeue", "-h", "-s", "-j", s.JobID)
	c.Env = s.Environ()
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("squeue -s: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// withSlurmEnvPrinted makes every rank print the Slurm task variables it
// sees before it starts the all-reduce.
func withSlurmEnvPrinted(job job.Job) job.Job {
	for h := range job.Hosts {
		for r := range job.Hosts[h].Ranks {
			rk := &job.Hosts[h].Ranks[r]
			rk.Argv = append([]string{"/bin/sh", "-c",
				`echo "SLURMENV procid=$SLURM_PROCID localid=$SLURM_LOCALID nodeid=$SLURM_NODEID ntasks=$SLURM_NTASKS"; exec "$@"`, "sh"}, rk.Argv...)
		}
	}
	return job
}

// The job's rank order is ours, not Slurm's task order: rank 0 runs on
// node3, the second node of the job is node1, ... Rank 5 fails in the
// first attempt only: --max-restarts runs the job again as a new step.
func TestSlurmLaunchAllreduce4x2(t *testing.T) {
	tb, s := slurmBed(t, 4)
	order := []string{"node3", "node1", "node4", "node2"}
	job := withSlurmEnvPrinted(allreduceJob(t, tb, "slurm4x2", order, 2, "--fail-rank", "5", "--fail-restarts", "1"))
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Launch(ctx, job, Options{Slurm: &s, Out: &out, MaxRestarts: 1, Grace: 3 * time.Second}); err != nil {
		t.Fatalf("Launch through srun: %v\noutput:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "restarting the whole job (restart 1 of 1)") {
		t.Errorf("no restart reported:\n%s", out.String())
	}
	text := out.String()
	master, _ := tb.Host("node3")
	for n, h := range job.Hosts {
		for _, r := range h.Ranks {
			prefix := fmt.Sprintf("%s:%d: ", h.Name, r.Rank)
			for _, want := range []string{
				fmt.Sprintf("%sENV RANK=%d LOCAL_RANK=%d WORLD_SIZE=8 LOCAL_WORLD_SIZE=2 MASTER_ADDR=%s MASTER_PORT=29512 TORCHELASTIC_RESTART_COUNT=1 HOST=%s\n",
					prefix, r.Rank, r.LocalRank, master.Addr, h.Name),
				fmt.Sprintf("%sSLURMENV procid=%d localid=%d nodeid=%d ntasks=8\n", prefix, r.Rank, r.LocalRank, n),
				fmt.Sprintf("%sALLREDUCE OK rank=%d sum=36\n", prefix, r.Rank),
			} {
				if !strings.Contains(text, want) {
					t.Errorf("missing %q", want)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
	if steps := slurmSteps(t, s); steps != "" {
		t.Errorf("steps left in the allocation:\n%s", steps)
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

// A failing rank stops the whole step; the summary names the rank; no step
// and no process is left.
func TestSlurmLaunchFailingRankStopsStep(t *testing.T) {
	tb, s := slurmBed(t, 4)
	// The job's files in its own directory, which every node drops once
	// the step is over (issue 21).
	job := inFilesDir(allreduceJob(t, tb, "slurmfail", tb.Names(), 2, "--fail-rank", "5", "--exit-code", "3", "--sleep", "60"), "/tmp/pipette-launch-slurmfail")
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := Launch(ctx, job, Options{Slurm: &s, Out: &out, Grace: 5 * time.Second})
	var jf *JobFailure
	if !errors.As(err, &jf) {
		t.Fatalf("Launch = %v, want a *JobFailure\noutput:\n%s", err, out.String())
	}
	if jf.Host != "node3" || jf.Rank != 5 || jf.ExitCode != 3 {
		t.Errorf("failure = host %s rank %d exit %d, want node3 rank 5 exit 3\n%v", jf.Host, jf.Rank, jf.ExitCode, err)
	}
	if steps := slurmSteps(t, s); steps != "" {
		t.Errorf("steps left in the allocation:\n%s", steps)
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	assertNoFilesDir(t, tb)
	tb.AssertNothingLeft(t)
}

// RunEach (the probe's and the file clean-up's step) returns only once
// Slurm no longer lists its step: what runs next finds the nodes free. One
// CI run found the clean-up step still listed right after a launch.
func TestSlurmRunEachLeavesNoStep(t *testing.T) {
	tb, s := slurmBed(t, 2)
	for i := range 10 {
		byNode, stderr, runErr, err := s.RunEach(context.Background(), tb.Names(), "echo hi")
		if runErr != nil || err != nil || len(byNode) != 2 {
			t.Fatalf("RunEach %d = %v, %v, %v: %s", i, byNode, runErr, err, stderr)
		}
		if steps := slurmSteps(t, s); steps != "" {
			t.Fatalf("after RunEach %d, steps left in the allocation:\n%s", i, steps)
		}
	}
}

// scancel of the allocation stops every rank within the grace period, and
// the summary says Slurm cancelled the job.
func TestSlurmScancelStopsJob(t *testing.T) {
	tb, s := slurmBed(t, 2)
	job := allreduceJob(t, tb, "slurmcancel", tb.Names(), 2, "--sleep", "120")
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var cancelledAt time.Time
	go func() {
		for range 900 {
			if strings.Count(out.String(), "sleeping 120s") == 4 {
				c := exec.Command("scancel", s.JobID)
				c.Env = s.Environ()
				cancelledAt = time.Now()
				if o, err := c.CombinedOutput(); err != nil {
					t.Errorf("scancel: %v: %s", err, o)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	grace := 5 * time.Second
	err := Launch(ctx, job, Options{Slurm: &s, Out: &out, Grace: grace})
	returned := time.Now()
	var jf *JobFailure
	if !errors.As(err, &jf) || !jf.Interrupted() || !strings.Contains(jf.Reason, "cancelled") {
		t.Fatalf("Launch = %v, want an interrupted failure saying the Slurm job was cancelled\noutput:\n%s", err, out.String())
	}
	// Slurm's own KillWait (5 s on the test-bed) plus our grace bound it.
	d := returned.Sub(cancelledAt)
	t.Logf("Launch returned %s after scancel", d)
	if cancelledAt.IsZero() || d > grace+20*time.Second {
		t.Errorf("Launch returned %s after scancel", d)
	}
	// No rank survives the cancel; slurmstepd may still be tidying up the
	// cancelled step for a moment (Slurm's, not ours): give it time, then
	// nothing at all may be left.
	left, err := tb.Leftovers(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		if !strings.Contains(l, "slurmstepd") {
			t.Errorf("left running after scancel: %s", l)
		}
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

// ^C to pipette-launch inside an allocation reaches every rank as SIGINT
// (a KeyboardInterrupt in each Python rank), once: through srun's stdin to
// each agent, not a scancel that would signal every process of the step.
func TestSlurmInterruptPassesTheSignal(t *testing.T) {
	tb, s := slurmBed(t, 2)
	job := allreduceJob(t, tb, "slurmint", tb.Names(), 2, "--sleep", "120")
	var out syncbuf.Buffer
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var interruptedAt time.Time
	go func() {
		for range 900 {
			if strings.Count(out.String(), "sleeping 120s") == 4 {
				interruptedAt = time.Now()
				cancel(Signaled{Signal: syscall.SIGINT})
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel(nil)
	}()
	grace := 5 * time.Second
	err := Launch(ctx, job, Options{Slurm: &s, Out: &out, Grace: grace})
	returned := time.Now()
	var jf *JobFailure
	if !errors.As(err, &jf) || !jf.Interrupted() || !strings.Contains(jf.Reason, "interrupt signal received") {
		t.Fatalf("Launch = %v, want an interrupted failure naming the signal\noutput:\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), ": KeyboardInterrupt"); n != 4 {
		t.Errorf("%d ranks raised KeyboardInterrupt, want all 4 once; output:\n%s", n, out.String())
	}
	// Well within the agents' bound (twice the grace and 20 s), after
	// which stop falls back to scancel.
	d := returned.Sub(interruptedAt)
	t.Logf("Launch returned %s after the interrupt", d)
	if interruptedAt.IsZero() || d > grace+20*time.Second {
		t.Errorf("Launch returned %s after the interrupt", d)
	}
	if steps := slurmSteps(t, s); steps != "" {
		t.Errorf("steps left in the allocation:\n%s", steps)
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

func TestSlurmBundleDispatch(t *testing.T) {
	// The dispatcher, run by a real sh as three tasks would, takes exactly
	// its own node's agent out of the bundle and leaves the rest of stdin
	// (heartbeats, EOF) to the agent.
	names := []string{"a", "bb", "c"}
	scripts := []string{"echo I am a\n", "echo I am bb; cat\n", "echo I am c\n"}
	bundle := append(slurmBundle(names, scripts), []byte("after the bundle\n")...)
	for _, n := range names {
		c := exec.Command("/bin/sh", "-c", slurmDispatcher, "pipette-dispatch", "@@pipette-x")
		c.Env = append(os.Environ(), "SLURMD_NODENAME="+n, "SLURM_STEP_ID=7", "TMPDIR="+t.TempDir())
		c.Stdin = strings.NewReader(string(bundle))
		o, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("node %s: %v: %s", n, err, o)
		}
		want := fmt.Sprintf("@@pipette-x node %s 7\nI am %s\n", n, n)
		if n == "bb" {
			want += "after the bundle\n"
		}
		if string(o) != want {
			t.Errorf("node %s: got %q, want %q", n, o, want)
		}
	}
}

func TestSlurmDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"00:00:37": 37 * time.Second, "01:02:03": time.Hour + 2*time.Minute + 3*time.Second, "2-00:00:01": 48*time.Hour + time.Second,
	} {
		if got, ok := slurmDuration(in); !ok || got != want {
			t.Errorf("slurmDuration(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"UNLIMITED", "", "10:00", "x-01:00:00"} {
		if _, ok := slurmDuration(bad); ok {
			t.Errorf("slurmDuration(%q) accepted", bad)
		}
	}
}
