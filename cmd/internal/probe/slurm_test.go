package probe

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// Probing the same hosts through srun (inside a real Slurm allocation on
// the test-bed) and through SSH writes the same cluster file; --measure's
// iperf3 pairs run as srun steps.
func TestProbeThroughSrunMatchesSSH(t *testing.T) {
	tb := testbed.New(t, testbed.Spec{Slurm: true, Hosts: []testbed.HostSpec{
		{Name: "ib1", Group: "a", RDMA: "infiniband", RateGbitPerS: 200},
		{Name: "roce1", Group: "a", RDMA: "roce", RateGbitPerS: 100},
		{Name: "eth1", Group: "b"},
	}})
	alloc := tb.SlurmAlloc(t, 3)
	t.Setenv("SLURM_CONF", alloc["SLURM_CONF"])
	dir := t.TempDir()
	probe := func(name string, opts Options) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		opts.IO = &cmdutil.IOStreams{Out: &stdout, ErrOut: &stderr}
		opts.Output = filepath.Join(dir, name+".yaml")
		opts.NProcPerNode = 2
		opts.CacheDir = filepath.Join(dir, name+"-cache")
		if err := Run(&opts); err != nil {
			t.Fatalf("probe %s: %v\nstderr:\n%s", name, err, stderr.String())
		}
		data, err := os.ReadFile(opts.Output)
		if err != nil {
			t.Fatal(err)
		}
		// The first line is the time it was written.
		_, body, _ := strings.Cut(string(data), "\n")
		return body
	}
	viaSSH := probe("ssh", Options{
		Hosts: "ib1,roce1,eth1", Launcher: cmdutil.LauncherSSH, Getenv: func(string) string { return "" },
		SSH: remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile, IdentityFiles: []string{tb.KeyFile}},
	})
	inAlloc := func(k string) string { return alloc[k] }
	// The allocation lists its nodes sorted (eth1,ib1,roce1): --hosts orders them.
	viaSrun := probe("srun", Options{Hosts: "ib1,roce1,eth1", Launcher: cmdutil.LauncherAuto, Getenv: inAlloc})
	if viaSrun != viaSSH {
		t.Errorf("cluster file through srun differs from SSH's:\n--- srun\n%s\n--- ssh\n%s", viaSrun, viaSSH)
	}
	for _, w := range []string{"ib1", "roce1", "eth1", "type: infiniband", "type: roce"} {
		if !strings.Contains(viaSrun, w) {
			t.Errorf("cluster file lacks %q:\n%s", w, viaSrun)
		}
	}

	measured := probe("srun-measure", Options{Launcher: cmdutil.LauncherSlurm, Getenv: inAlloc, Measure: true, MeasureSeconds: 1, MeasurePort: 5311})
	if !strings.Contains(measured, "measured:") || !strings.Contains(measured, "iperf3") {
		t.Errorf("--measure through srun wrote no matrix:\n%s", measured)
	}

	// A host outside the allocation is refused, naming it.
	var stdout, stderr bytes.Buffer
	err := Run(&Options{IO: &cmdutil.IOStreams{Out: &stdout, ErrOut: &stderr}, Hosts: "ib1,node9", Launcher: cmdutil.LauncherSlurm,
		Getenv: inAlloc, Output: filepath.Join(dir, "x.yaml")})
	if err == nil || !strings.Contains(err.Error(), "node9 is not in the allocation") || probeExit(err) != 2 {
		t.Errorf("host outside the allocation: err = %v (exit %d)", err, probeExit(err))
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}
