package run

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// These tests run real torch.distributed (gloo) jobs on this machine
// without SSH, as torchrun does: --standalone, or a single host that is this
// machine. No sshd is involved: the SSH options given would fail any
// connection (a known_hosts file that knows no host).

// localDir copies the example job into a fresh directory and marks every
// process the test starts (agent, watchdog, ranks inherit our environment)
// with a variable no other process has, so leftovers can be found.
func localDir(t *testing.T) (dir, mark string) {
	t.Helper()
	if out, err := exec.Command(cmdtest.BedPython, "-c", "import torch.distributed").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch.distributed (install the Debian package python3-torch): %v\n%s", cmdtest.BedPython, err, out)
	}
	dir = t.TempDir()
	src, err := os.ReadFile("../../../examples/torch_allreduce.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "torch_allreduce.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	mark = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Setenv("PIPETTE_LOCAL_TEST_MARK", mark)
	return dir, mark
}

// localArgs is a local job's command line up to the script's arguments.
func localArgs(t *testing.T, dir string, where ...string) []string {
	t.Helper()
	return append(localLine(t, dir, where...), filepath.Join(dir, "torch_allreduce.py"), "--expect-world", "2", "--timeout", "60")
}

// localLine is a local job's command line of 2 ranks up to the script.
func localLine(t *testing.T, dir string, where ...string) []string {
	t.Helper()
	kh := filepath.Join(dir, "known_hosts_empty")
	if err := os.WriteFile(kh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"pipette-launch", "run"}, where...)
	return append(args, "--nproc-per-node", "2", "--known-hosts", kh, "--python", cmdtest.BedPython, "--workdir", dir,
		"--stop-grace", "3s", "--master-port", strconv.Itoa(mustFreePort(t)))
}

// mustFreePort is freePort, failing the test when none is found.
func mustFreePort(t *testing.T) int {
	t.Helper()
	p, err := cmdutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leftovers lists the processes (other than this one) carrying mark.
func leftovers(mark string) []string {
	var left []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(p))
		if pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(p + "/environ")
		if err != nil || !bytes.Contains(env, []byte("PIPETTE_LOCAL_TEST_MARK="+mark+"\x00")) {
			continue
		}
		if stat, err := os.ReadFile(p + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // dead, not yet reaped
		}
		cmd, _ := os.ReadFile(p + "/cmdline")
		left = append(left, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
	}
	return left
}

func assertNothingLeftHere(t *testing.T, mark string) {
	t.Helper()
	// The agent reaps its helpers as it ends, and a watchdog that saw EOF
	// stops the ranks (TERM, KILL after the 3 s grace): give them that.
	deadline := time.Now().Add(15 * time.Second)
	for len(leftovers(mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := leftovers(mark); len(left) > 0 {
		t.Errorf("processes of the job still run:\n%s", strings.Join(left, "\n"))
	}
}

func TestRunLocallyWithoutSSH(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		where []string
		jobCase
	}{
		{[]string{"--standalone"}, jobCase{
			name:    "standalone allreduce",
			wantOut: []string{"localhost:0: ALLREDUCE OK rank=0 sum=3", "localhost:1: ALLREDUCE OK rank=1 sum=3", "MASTER_ADDR=127.0.0.1 ", "LOCAL_WORLD_SIZE=2"},
		}},
		{[]string{"--hosts", host}, jobCase{
			name:     "this machine's name, rank 1 exits 3",
			extra:    []string{"--fail-rank", "1", "--exit-code", "3", "--sleep", "60"},
			wantCode: 1,
			wantOut:  []string{"MASTER_ADDR=127.0.0.1 "},
			wantErr:  []string{"rank 1", "exit code 3", "failing on purpose", host},
			// Rank 0 sleeps 60 s: stopping it must not wait for that.
			maxSecond: 20,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, mark := localDir(t)
			tc.run(t, append(localArgs(t, dir, tc.where...), tc.extra...))
			assertNothingLeftHere(t, mark)
		})
	}
}

// TestRunLocallySIGINT: ^C (SIGINT) to a real pipette-launch process running
// a local job stops both ranks and exits non-zero; nothing is left.
func TestRunLocallySIGINT(t *testing.T) {
	dir, mark := localDir(t)
	errOut := signalRun(t, append(localArgs(t, dir, "--standalone"), "--sleep", "120"), 2, syscall.SIGINT)
	if !strings.Contains(errOut, "interrupted") {
		t.Errorf("the summary does not say the job was interrupted:\n%s", errOut)
	}
	assertNothingLeftHere(t, mark)
}

// TestRunLocallySignalsToHandle: torchrun's --signals-to-handle with
// SIGUSR1 added (what a Slurm job whose sbatch has --signal=USR1@90
// writes) makes SIGUSR1 stop every rank as SIGTERM does, within
// --shutdown-timeout (torchrun's spelling of --stop-grace, equal to it
// here). The ranks are shells (--no-python): the signal's path is
// pipette-launch's, and they start without torch's import time.
func TestRunLocallySignalsToHandle(t *testing.T) {
	dir, mark := localDir(t)
	args := append(localLine(t, dir, "--standalone"), "--signals_to_handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1", "--shutdown-timeout", "3",
		"--no-python", "/bin/sh", "-c", "echo sleeping 120s; exec sleep 120")
	errOut := signalRun(t, args, 2, syscall.SIGUSR1)
	if !strings.Contains(errOut, "interrupted") {
		t.Errorf("the summary does not say the job was interrupted:\n%s", errOut)
	}
	assertNothingLeftHere(t, mark)
}

// TestRunLocallyKilledLeavesNothing: pipette-launch killed outright
// (SIGKILL: no handler runs) still leaves nothing running: the agent's
// stdin was our pipe, the kernel closes it, and its watchdog stops the ranks.
func TestRunLocallyKilledLeavesNothing(t *testing.T) {
	dir, mark := localDir(t)
	signalRun(t, append(localArgs(t, dir, "--standalone"), "--sleep", "120"), 2, syscall.SIGKILL)
	assertNothingLeftHere(t, mark)
}

// TestNProcPerNodeCountedHere: --nproc-per-node gpu|auto on a job that runs
// on this machine count its GPUs with nvidia-smi -L, as torchrun's
// determine_local_world_size counts torch's: gpu without a GPU is an error
// (exit 2), auto falls back to one rank per CPU. nvidia-smi here is absent
// (an empty PATH) or prints a recorded real answer (fixtures, 4 GPUs).
func TestNProcPerNodeCountedHere(t *testing.T) {
	none := t.TempDir()
	four := t.TempDir()
	if err := os.WriteFile(filepath.Join(four, "nvidia-smi"), []byte(nvidiaSMIListing(4)), 0o755); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name, path, nproc, cvd string
		where                  []string
		wantCode               int
		want                   string
	}{
		{"gpu, no GPU", none, "gpu", "", []string{"--standalone"}, 2, "--nproc-per-node gpu: this machine has no GPU to run on (nvidia-smi is not installed)"},
		{"auto, no GPU: one rank per CPU", none, "auto", "", []string{"--standalone"}, 0, fmt.Sprintf("# job pipette: %d ranks on 1 host", runtime.NumCPU())},
		{"gpu, 4 GPUs", four, "gpu", "", []string{"--hosts", "localhost"}, 0, "# job pipette: 4 ranks on 1 host"},
		{"auto, 4 GPUs", four, "auto", "", []string{"--hosts", host}, 0, "# job pipette: 4 ranks on 1 host"},
		{"gpu, CUDA_VISIBLE_DEVICES=1,3", four, "gpu", "1,3", []string{"--standalone"}, 0, "# job pipette: 2 ranks on 1 host"},
		{"gpu, every GPU hidden", four, "gpu", "-1", []string{"--standalone"}, 2, "CUDA_VISIBLE_DEVICES hides every GPU"},
		{"gpu, another host", four, "gpu", "", []string{"--hosts", "node7"}, 2, "--nproc-per-node gpu needs a cluster file"},
		{"cpu: one rank per CPU, GPUs or not", four, "cpu", "", []string{"--standalone"}, 0, fmt.Sprintf("# job pipette: %d ranks on 1 host", runtime.NumCPU())},
		{"cpu, another host", four, "cpu", "", []string{"--hosts", "node7"}, 2, "--nproc-per-node cpu counts this machine's CPUs"},
		{"cpu, a cluster file", four, "cpu", "", []string{"--cluster", "example"}, 2, "--nproc-per-node cpu is torchrun's one rank per CPU of this machine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", tc.path)
			if tc.cvd != "" {
				t.Setenv("CUDA_VISIBLE_DEVICES", tc.cvd)
			} else {
				t.Setenv("CUDA_VISIBLE_DEVICES", "") // restored after the test
				os.Unsetenv("CUDA_VISIBLE_DEVICES")
			}
			var out, errOut bytes.Buffer
			args := append(append([]string{"pipette-launch", "run", "--dry-run", "--no-check-script"}, tc.where...), "--nproc-per-node", tc.nproc, "train.py")
			code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			if code != tc.wantCode || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, tc.want, out.String(), errOut.String())
			}
		})
	}
}

// TestDryRunSaysItRunsHere: a dry run of a job that runs on this machine
// says so, in text and in JSON; one for another host does not.
func TestDryRunSaysItRunsHere(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--standalone"}, true},
		{[]string{"--hosts", "127.0.0.1"}, true},
		{[]string{"--hosts", "127.0.0.1", "--launcher", "ssh"}, false},
		{[]string{"--hosts", "127.0.0.1:2222"}, false},
		{[]string{"--hosts", "node7"}, false},
	} {
		for _, j := range []string{"", "--json"} {
			args := append(append([]string{"pipette-launch", "run", "--dry-run", "--no-check-script", "--nproc-per-node", "2"}, tc.args...), "train.py")
			if j != "" {
				args = append(args[:3], append([]string{j}, args[3:]...)...)
			}
			var out, errOut bytes.Buffer
			code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			said := strings.Contains(out.String(), "runs on this machine without SSH") || strings.Contains(out.String(), `"runs_here_without_ssh": true`)
			if code != 0 || said != tc.want {
				t.Errorf("%v %s: exit %d, says it runs here %v, want %v\n%s%s", tc.args, j, code, said, tc.want, out.String(), errOut.String())
			}
		}
	}
}

// TestPreflightRunsWhereTheJobRuns (issue 21): run --preflight --standalone
// started the collective test over SSH to localhost (it failed in 0.02 s,
// "rank 0 never reported"); it runs on this machine without SSH, as the
// job does.
func TestPreflightRunsWhereTheJobRuns(t *testing.T) {
	var got *Options
	f := &fakes{probe: noProbe, launch: func(context.Context, *job.Job, *Options) error { return nil }}
	f.preflight = func(_ context.Context, _ *job.Job, o *Options, _ io.Writer) error {
		got = o
		return nil
	}
	// The stand-in preflight reports nothing, so the run stops there.
	_, _, errOut := runCLIWith(t, f.adjust, "--preflight", "--standalone", "--nproc_per_node", "2", "--no-check-script", "train.py")
	if got == nil {
		t.Fatalf("no preflight started\n%s", errOut)
	}
	if !preflightLaunchOptions(got, io.Discard).Local {
		t.Errorf("the preflight of a --standalone job is started over SSH, not on this machine")
	}
}

// TestPreflightOneRank: a one-rank job has no group to prove, and its
// preflight passes before the job runs. The preflight's rank crashed on
// a null phase list instead (found on a one-GPU machine: "TypeError:
// 'NoneType' object is not iterable"), after the verdict said it passed.
func TestPreflightOneRank(t *testing.T) {
	dir, mark := localDir(t)
	args := localLine(t, dir, "--standalone", "--preflight")
	for i, a := range args {
		if a == "--nproc-per-node" {
			args[i+1] = "1"
		}
	}
	jobCase{
		name:    "one rank",
		wantOut: []string{"localhost:0: ALLREDUCE OK rank=0 sum=1"},
		wantErr: []string{"preflight passed: no group or pipeline link has more than one rank"},
	}.run(t, append(args, filepath.Join(dir, "torch_allreduce.py"), "--expect-world", "1", "--timeout", "60"))
	assertNothingLeftHere(t, mark)
}
