package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/testbed"
)

func TestChooseLauncher(t *testing.T) {
	in := func(k string) string { return map[string]string{"SLURM_JOB_ID": "42"}[k] }
	out := func(string) string { return "" }
	for _, tc := range []struct {
		flag   string
		getenv func(string) string
		want   string
		err    string
	}{
		{"auto", in, launcherSlurm, ""},
		{"", in, launcherSlurm, ""},
		{"auto", out, launcherSSH, ""},
		{"ssh", in, launcherSSH, ""},
		{"slurm", out, launcherSlurm, ""},
		{"srun", out, "", `--launcher "srun": want auto, ssh or slurm`},
	} {
		got, err := chooseLauncher(tc.flag, tc.getenv)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("chooseLauncher(%q) = %q, %v; want %q, %q", tc.flag, got, err, tc.want, tc.err)
		}
	}
}

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
	probe := func(name string, opts ProbeOptions) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		opts.IO = &IOStreams{Out: &stdout, ErrOut: &stderr}
		opts.Output = filepath.Join(dir, name+".yaml")
		opts.NProcPerNode = 2
		opts.CacheDir = filepath.Join(dir, name+"-cache")
		if err := runProbe(&opts); err != nil {
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
	viaSSH := probe("ssh", ProbeOptions{
		Hosts: "ib1,roce1,eth1", Launcher: launcherSSH, Getenv: func(string) string { return "" },
		SSH: remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile, IdentityFiles: []string{tb.KeyFile}},
	})
	inAlloc := func(k string) string { return alloc[k] }
	// The allocation lists its nodes sorted (eth1,ib1,roce1): --hosts orders them.
	viaSrun := probe("srun", ProbeOptions{Hosts: "ib1,roce1,eth1", Launcher: launcherAuto, Getenv: inAlloc})
	if viaSrun != viaSSH {
		t.Errorf("cluster file through srun differs from SSH's:\n--- srun\n%s\n--- ssh\n%s", viaSrun, viaSSH)
	}
	for _, w := range []string{"ib1", "roce1", "eth1", "type: infiniband", "type: roce"} {
		if !strings.Contains(viaSrun, w) {
			t.Errorf("cluster file lacks %q:\n%s", w, viaSrun)
		}
	}

	measured := probe("srun-measure", ProbeOptions{Launcher: launcherSlurm, Getenv: inAlloc, Measure: true, MeasureSeconds: 1, MeasurePort: 5311})
	if !strings.Contains(measured, "measured:") || !strings.Contains(measured, "iperf3") {
		t.Errorf("--measure through srun wrote no matrix:\n%s", measured)
	}

	// A host outside the allocation is refused, naming it.
	var stdout, stderr bytes.Buffer
	err := runProbe(&ProbeOptions{IO: &IOStreams{Out: &stdout, ErrOut: &stderr}, Hosts: "ib1,node9", Launcher: launcherSlurm,
		Getenv: inAlloc, Output: filepath.Join(dir, "x.yaml")})
	if err == nil || !strings.Contains(err.Error(), "node9 is not in the allocation") || probeExit(err) != 2 {
		t.Errorf("host outside the allocation: err = %v (exit %d)", err, probeExit(err))
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

// slurmE2E is a 4-host Slurm test-bed with the example job and a built
// pipette-launch under /var/tmp, which every host sees (each has a private
// /tmp).
func slurmE2E(t *testing.T, names string) (*testbed.Testbed, string, string) {
	t.Helper()
	tb, dir := e2eBedSpec(t, testbed.Spec{Slurm: true, Names: names})
	bin := filepath.Join(dir, "pipette-launch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return tb, dir, bin
}

func slurmJobArgs(dir string, port int, extra ...string) []string {
	args := []string{"--nproc-per-node", "2", "--framework", "torch", "--python", bedPython, "--workdir", dir,
		"--stop-grace", "3s", "--master-port", fmt.Sprint(port), filepath.Join(dir, "torch_allreduce.py"),
		"--expect-world", "8", "--timeout", "60"}
	return append(args, extra...)
}

func checkAllreduceOutput(t *testing.T, text, masterAddr string, hosts []string) {
	t.Helper()
	for n, h := range hosts {
		for l := 0; l < 2; l++ {
			r := n*2 + l
			for _, w := range []string{
				fmt.Sprintf("%s:%d: ENV RANK=%d LOCAL_RANK=%d WORLD_SIZE=8 LOCAL_WORLD_SIZE=2 MASTER_ADDR=%s MASTER_PORT=", h, r, r, l, masterAddr),
				fmt.Sprintf("%s:%d: ALLREDUCE OK rank=%d sum=36", h, r, r),
			} {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q", w)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// Inside an allocation (as under salloc), run with --launcher left at auto
// starts the job through srun: every rank gets its torchrun environment,
// and the all-reduce is right, on hosts whose own names do not resolve
// (the launch probe runs through srun too).
func TestRunInsideSallocUsesSrun(t *testing.T) {
	tb, dir, _ := slurmE2E(t, testbed.NamesNone)
	alloc := tb.SlurmAlloc(t, 4)
	for k, v := range alloc {
		t.Setenv(k, v)
	}
	var out, errOut syncbuf.Buffer
	args := append([]string{"pipette-launch", "run"}, slurmJobArgs(dir, 29631)...)
	if code := runApp(args, &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	checkAllreduceOutput(t, out.String(), tb.Hosts[0].Addr, []string{"node1", "node2", "node3", "node4"})

	// --dry-run shows the srun step instead of SSH sessions.
	out, errOut = syncbuf.Buffer{}, syncbuf.Buffer{}
	args = append([]string{"pipette-launch", "run", "--dry-run", "--hosts", "node[1-4]"}, slurmJobArgs(dir, 29631)...)
	if code := runApp(args, &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "started as one srun step in Slurm job "+alloc["SLURM_JOB_ID"]) ||
		!strings.Contains(out.String(), "--nodelist=node1,node2,node3,node4") {
		t.Errorf("dry run does not show the srun step:\n%s", out.String())
	}
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}

// The batch script `pipette-launch sbatch` writes runs as it is under
// `sbatch --wait`, and passes the same job.
func TestSbatchScriptRunsAsWritten(t *testing.T) {
	tb, dir, bin := slurmE2E(t, "")
	script := filepath.Join(dir, "job.sbatch")
	args := append([]string{"sbatch", "--hosts", "node[1-4]", "--time", "10:00", "--write", script}, slurmJobArgs(dir, 29641)...)
	// Submitted from the shared directory, as a user would: the batch script
	// starts where sbatch ran, and each host has a private /tmp (where this
	// checkout may live).
	gen := exec.Command(bin, args...)
	gen.Dir = dir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("pipette-launch sbatch: %v\n%s", err, out)
	}
	body, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"#SBATCH --nodes=4\n", "#SBATCH --ntasks-per-node=1\n", "#SBATCH --nodelist=node1,node2,node3,node4\n",
		"#SBATCH --time=10:00\n", "#SBATCH --signal=B:TERM@120\n", " run --launcher slurm "} {
		if !strings.Contains(string(body), w) {
			t.Errorf("batch script lacks %q:\n%s", w, body)
		}
	}
	if strings.Contains(string(body), "--gpus-per-node") {
		t.Errorf("batch script asks for GPUs on CPU hosts:\n%s", body)
	}
	outFile := filepath.Join(dir, "slurm.out")
	cmd := exec.Command("sbatch", "--wait", "-o", outFile, script)
	cmd.Env = append(os.Environ(), tb.SlurmEnv()...)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(outFile)
		t.Fatalf("sbatch --wait: %v: %s\njob output:\n%s", err, o, log)
	}
	log, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	checkAllreduceOutput(t, string(log), tb.Hosts[0].Addr, []string{"node1", "node2", "node3", "node4"})
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}
