package testbed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// slurmCmd runs a Slurm client against tb's controller.
func slurmCmd(t *testing.T, tb *Testbed, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), tb.SlurmEnv()...)
	cmd.Dir = tb.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestSlurmTestbedRunsStepsAndBatchJobs(t *testing.T) {
	tb := New(t, Spec{Slurm: true, Hosts: []HostSpec{{Name: "s1"}, {Name: "s2"}, {Name: "s3"}}})

	// One task per node, as the launcher starts its host scripts: each task
	// runs on its own host (name, private /tmp) and knows its node index.
	out := slurmCmd(t, tb, 60*time.Second, "srun", "-N3", "--ntasks-per-node=1", "-l",
		"sh", "-c", `echo "$(hostname) $SLURM_NODEID $SLURMD_NODENAME"`)
	lines := strings.Split(out, "\n")
	slices.Sort(lines)
	want := []string{"0: s1 0 s1", "1: s2 1 s2", "2: s3 2 s3"}
	if !slices.Equal(lines, want) {
		t.Errorf("srun -N3 -l: got %q, want %q", lines, want)
	}

	// A batch script runs as written (sbatch --wait), on the first node, with
	// the allocation's node list.
	script := filepath.Join(tb.Dir, "job.sh")
	body := "#!/bin/sh\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\necho \"batch $(hostname) $SLURM_JOB_NODELIST\"\nsrun -l hostname\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	outFile := filepath.Join(tb.Dir, "job.out")
	slurmCmd(t, tb, 60*time.Second, "sbatch", "--wait", "-o", outFile, script)
	got, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"batch s1 s[1-3]", "0: s1", "1: s2", "2: s3"} {
		if !strings.Contains(string(got), w) {
			t.Errorf("batch output lacks %q:\n%s", w, got)
		}
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)

	// Pids, not names: another package's test-bed may take this instance's
	// index (and so its netns and state dir names) as soon as it is free.
	daemons := append([]owner(nil), tb.st.Daemons...)
	if len(daemons) != 5 { // munged, slurmctld, 3 slurmd
		t.Errorf("recorded daemons = %d, want 5 (munged, slurmctld, one slurmd per host)", len(daemons))
	}
	if err := tb.Down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	for _, d := range daemons {
		if d.alive() {
			t.Errorf("daemon pid %d survived Down", d.Pid)
		}
	}
}
