package run

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"

	"github.com/pipette-launch/pipette-launch/testbed"
)

// These tests start real torch.distributed (gloo) jobs through the CLI on a
// real test-bed: 4 hosts (network namespaces with their own sshd), 2 ranks
// each, hosts given by a hostfile as a torchrun user would. They mostly
// wait (sshd, torch start-up, the job's own sleeps), so those that set no
// environment and no working directory (t.Setenv, t.Chdir: process-wide)
// run in parallel (t.Parallel), each on its own test-bed instance (several
// coexist: instances are allocated under a flock); so do the package's
// other slow tests that share nothing with the rest (DeepSpeed, Slurm,
// Kubernetes). A parallel test gives run its environment (Options.Env)
// rather than setting it (docs/development.md).

// e2eBed brings up 4 hosts and puts the example job where every host sees
// it: under /var/tmp, since each host has a private /tmp.
func e2eBed(t *testing.T) (*testbed.Testbed, string) {
	t.Helper()
	return e2eBedNames(t, testbed.NamesResolve)
}

// e2eBedNames is e2eBed with the hosts' name resolution as names says.
func e2eBedNames(t *testing.T, names string) (*testbed.Testbed, string) {
	t.Helper()
	return cmdtest.Bed(t, testbed.Spec{Names: names})
}

// e2eArgs is the command line up to and including the script.
func e2eArgs(tb *testbed.Testbed, dir string) []string {
	return []string{"pipette-launch", "run",
		"--hostfile", tb.HostsFile, "--nproc-per-node", "2", "--framework", "torch",
		"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile,
		"--python", cmdtest.BedPython, "--workdir", dir, "--stop-grace", "3s", "--master-port", "29611",
		filepath.Join(dir, "torch_allreduce.py"), "--expect-world", "8", "--timeout", "60"}
}

func TestRunCLIOnTestbed(t *testing.T) {
	tb, dir := e2eBed(t)
	tests := []jobCase{
		{
			name:     "allreduce 4x2",
			wantCode: 0,
			wantOut: []string{"node1:0: ALLREDUCE OK rank=0 sum=36", "node4:7: ALLREDUCE OK rank=7 sum=36",
				"node3:5: ENV", "WORLD_SIZE=8", "MASTER_ADDR=" + tb.Hosts[0].Addr + " ", "MASTER_PORT=29611", "LOCAL_WORLD_SIZE=2"},
		},
		{
			name:     "rank 5 exits 3",
			extra:    []string{"--fail-rank", "5", "--exit-code", "3", "--sleep", "60"},
			wantCode: 1,
			wantErr:  []string{"node3", "rank 5", "exit code 3", "failing on purpose"},
			// The other ranks sleep 60 s: stopping them must not wait for
			// that (--stop-grace 3s; the margin is for a busy machine).
			maxSecond: 20,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, append(e2eArgs(tb, dir), tc.extra...))
			assertNoJobDirs(t, tb)
			tb.AssertNothingLeft(t)
		})
	}
	t.Run("environment", func(t *testing.T) { checkEnvJob(t, tb, dir) })
	t.Run("two hosts behind one address", func(t *testing.T) { checkHostsBehindOneAddress(t, tb, dir) })
	t.Run("files", func(t *testing.T) { checkFilesJob(t, tb, dir) })
	t.Run("secrets", func(t *testing.T) { checkSecretsJob(t, tb, dir) })
}

// checkEnvJob runs a job that prints its own environment: the launching
// shell's forwarded variables, .deepspeed_env from the launch directory and
// --env arrive with --env winning; a shell NCCL_SOCKET_IFNAME does not beat
// the per-host interface (and a warning names it); the secret reaches the
// ranks but pipette-launch itself never prints it.
func checkEnvJob(t *testing.T, tb *testbed.Testbed, dir string) {
	script := "import os, sys\nfor k in sys.argv[1:]:\n    print('ENVCHECK %s=%s' % (k, os.environ.get(k, '<unset>')), flush=True)\n"
	if err := os.WriteFile(filepath.Join(dir, "envcheck.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".deepspeed_env"), []byte("FROM_DS_ENV=yes\nHF_HOME=/from-ds-env\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("HF_HOME", "/from-shell")
	t.Setenv("NCCL_DEBUG", "WARN")
	t.Setenv("NCCL_SOCKET_IFNAME", "=bogus0")
	t.Setenv("WANDB_API_KEY", "wandb-s3cret-42")
	t.Setenv("NOT_FORWARDED", "x")
	args := e2eArgs(tb, dir)
	args = append(args[:len(args)-5], "--env", "HF_HOME=/from-flag", "--env", "EXTRA=a,b", filepath.Join(dir, "envcheck.py"),
		"FROM_DS_ENV", "HF_HOME", "NCCL_DEBUG", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "WANDB_API_KEY", "NOT_FORWARDED", "EXTRA")
	var out, errOut syncbuf.Buffer
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"FROM_DS_ENV=yes", "HF_HOME=/from-flag", "NCCL_DEBUG=WARN", "NCCL_SOCKET_IFNAME==eth0",
		"GLOO_SOCKET_IFNAME=eth0", "WANDB_API_KEY=wandb-s3cret-42", "NOT_FORWARDED=<unset>", "EXTRA=a,b"} {
		if n := strings.Count(out.String(), "ENVCHECK "+want+"\n"); n != 8 {
			t.Errorf("%d of 8 ranks report %s\n%s", n, want, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "NCCL_SOCKET_IFNAME==bogus0 from your environment is not used") {
		t.Errorf("no warning names the overridden NCCL_SOCKET_IFNAME:\n%s", errOut.String())
	}
	if strings.Contains(errOut.String(), "wandb-s3cret") {
		t.Errorf("pipette-launch printed the secret:\n%s", errOut.String())
	}
	tb.AssertNothingLeft(t)
	// The same job's dry run masks the secret the ranks just saw.
	var dry, dryErr syncbuf.Buffer
	if code := runApp(append([]string{args[0], args[1], "--dry-run"}, args[2:]...), &cmdutil.IOStreams{In: strings.NewReader(""), Out: &dry, ErrOut: &dryErr}); code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, dryErr.String())
	}
	if !strings.Contains(dry.String(), "WANDB_API_KEY=****") || strings.Contains(dry.String()+dryErr.String(), "wandb-s3cret") {
		t.Errorf("the dry run does not mask WANDB_API_KEY:\n%s%s", dry.String(), dryErr.String())
	}
}

// TestRunCLIHostNamesDoNotResolve: on hosts where no host name resolves,
// not even a host's own (common in containers), a gloo all_reduce over 4
// hosts x 2 ranks runs with no variable set by the user: MASTER_ADDR is
// rank 0's probed address and every host binds the interface that routes
// there. Without that, gloo falls back to loopback and ranks die with
// "connect [127.0.0.1]: Connection refused".
func TestRunCLIHostNamesDoNotResolve(t *testing.T) {
	t.Parallel()
	for _, names := range []string{testbed.NamesNone, testbed.NamesLoopback} {
		t.Run(names, func(t *testing.T) {
			t.Parallel()
			tb, dir := e2eBedNames(t, names)
			var out, errOut syncbuf.Buffer
			code := runApp(e2eArgs(tb, dir), &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			if code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
			}
			for r := range 8 {
				if want := fmt.Sprintf(":%d: ALLREDUCE OK rank=%d sum=36", r, r); !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q", want)
				}
			}
			if want := "MASTER_ADDR=" + tb.Hosts[0].Addr + " "; !strings.Contains(out.String(), want) {
				t.Errorf("stdout lacks %q\n%s", want, out.String())
			}
			tb.AssertNothingLeft(t)
		})
	}
}

// jobCase is a job run through the CLI and what must come of it.
type jobCase struct {
	name      string
	extra     []string // after the command line's script
	wantCode  int
	wantOut   []string // in stdout
	wantErr   []string // in stderr
	maxSecond float64  // the most from the failing rank's exit to ours
}

// run runs args through runApp and checks the outcome.
func (tc jobCase) run(t *testing.T, args []string) {
	t.Helper()
	var out, errOut syncbuf.Buffer
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	end := time.Now()
	if code != tc.wantCode {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.wantCode, out.String(), errOut.String())
	}
	for _, w := range tc.wantOut {
		if !strings.Contains(out.String(), w) {
			t.Errorf("stdout lacks %q\nstdout:\n%s", w, out.String())
		}
	}
	for _, w := range tc.wantErr {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("stderr lacks %q\nstderr:\n%s", w, errOut.String())
		}
	}
	if tc.maxSecond > 0 {
		// Only the interval we must bound: from the failing rank's exit
		// (the summary's time, the host's own stamp) to our exit; torch
		// start-up on a busy machine is not ours.
		failed, err := summaryTime(errOut.String())
		if err != nil {
			t.Fatal(err)
		}
		if took := end.Sub(failed).Seconds(); took > tc.maxSecond {
			t.Errorf("exited %.1fs after the rank failed, want under %.0fs: the job was not stopped promptly", took, tc.maxSecond)
		}
	}
}

// summaryTime reads the root cause's time from a failure summary.
func summaryTime(stderr string) (time.Time, error) {
	m := regexp.MustCompile(`(?m)^  time      : (\S+)$`).FindStringSubmatch(stderr)
	if m == nil {
		return time.Time{}, fmt.Errorf("no time in the failure summary:\n%s", stderr)
	}
	return time.Parse("2006-01-02_15:04:05.000", m[1])
}

// TestRunCLISIGTERM sends a real SIGTERM to a real pipette-launch process
// mid-run: it must stop every rank on every host and exit non-zero.
func TestRunCLISIGTERM(t *testing.T) {
	t.Parallel()
	tb, dir := e2eBed(t)
	signalRun(t, append(e2eArgs(tb, dir), "--sleep", "120"), 8, syscall.SIGTERM)
	assertNoJobDirs(t, tb)
	tb.AssertNothingLeft(t)
}

// signalRun starts a real pipette-launch process on args, waits until its
// ranks (n of them) sleep, sends sig and requires a non-zero exit within
// 30 s; it returns the process's stderr.
func signalRun(t *testing.T, args []string, n int, sig syscall.Signal) string {
	t.Helper()
	bin := cmdtest.Build(t, t.TempDir())
	// The test is of ^C at a terminal: pipette-launch leaves alone a
	// signal it was started ignoring (a shell's background job ignores
	// SIGINT, and a test binary run in one passes that on). Caught here
	// while the child starts, sig reaches it at its default, as from a
	// foreground shell.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, sig)
	defer signal.Stop(caught)
	cmd := exec.Command(bin, args[1:]...)
	var out, errOut syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until all ranks are past init and sleeping.
	deadline := time.Now().Add(90 * time.Second)
	for strings.Count(out.String(), ": sleeping ") < n {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("ranks never all started\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err == nil || cmd.ProcessState.ExitCode() == 0 {
			t.Errorf("pipette-launch exited 0 after %s; want non-zero\nstderr:\n%s", sig, errOut.String())
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("pipette-launch still running 30s after %s\nstderr:\n%s", sig, errOut.String())
	}
	return errOut.String()
}
