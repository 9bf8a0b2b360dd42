package job

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalRank reports which signals it starts ignoring (SigIgn, a mask by
// signal number), then says up and ends on the first stop signal it gets,
// naming it, and exits 0: a graceful shutdown. Without one it ends after a
// minute: a test that fails leaves nothing running.
var signalRank = RankJob{Argv: []string{"/bin/sh", "-c",
	`echo "ignored $(awk '/^SigIgn/ {print $2}' /proc/$$/status)"; for s in TERM INT HUP QUIT USR1; do trap "echo got $s; exit 0" $s; done; echo up; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; echo "no signal"`}}

// startScript runs the host script of a one-rank job by hand, as a user
// runs what --output-dir writes, under env with envArgs (--ignore-signal:
// started as a shell's background job is), and returns its lines.
func startScript(t *testing.T, envArgs ...string) (*exec.Cmd, *bufio.Scanner) {
	return startScriptEnv(t, nil, envArgs...)
}

// startScriptEnv is startScript with environ added to the script's.
func startScriptEnv(t *testing.T, environ []string, envArgs ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	script, err := HostScript(&Job{Name: "j", StopGrace: 5, Hosts: []HostJob{{Name: "h", Ranks: []RankJob{signalRank}}}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "host.sh")
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("env", append(envArgs, "/bin/sh", path)...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), environ...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// TestHostScriptPassesOnItsSignal: SIGINT, SIGHUP, SIGQUIT or SIGTERM to a
// host script reaches its ranks as that signal, as torchrun's agent passes
// it on (^C is a KeyboardInterrupt in a Python rank, not a SIGTERM), and
// the script ends with 128 + the signal (every rank ending well after a
// signal is still no success).
func TestHostScriptPassesOnItsSignal(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			// The script itself must take the signal: a test run from a
			// shell's background job starts ignoring INT and QUIT, one
			// under nohup HUP.
			cmd, sc := startScript(t, "--default-signal")
			waitUp(t, sc)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var got []string
			for sc.Scan() {
				got = append(got, sc.Text())
			}
			err := cmd.Wait()
			if want := "got " + StopSignalName(sig); len(got) != 1 || got[0] != want {
				t.Errorf("the rank said %q after the script got %s, want %q", got, sig, want)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 128+int(sig) {
				t.Errorf("script ended with %v, want status %d", err, 128+int(sig))
			}
		})
	}
}

// TestRanksStartWithIntAndQuitAtDefault: a shell starts its background
// jobs ignoring SIGINT and SIGQUIT, and exec keeps that; the script sets
// them back for its ranks (torchrun's workers start with Python's
// KeyboardInterrupt handler), even when the script itself was started
// ignoring them.
func TestRanksStartWithIntAndQuitAtDefault(t *testing.T) {
	t.Parallel()
	for _, envArgs := range [][]string{{"--default-signal"}, {"--ignore-signal=INT,QUIT"}} {
		t.Run(envArgs[0], func(t *testing.T) {
			t.Parallel()
			_, sc := startScript(t, envArgs...)
			if !sc.Scan() {
				t.Fatal("the rank said nothing")
			}
			mask, ok := strings.CutPrefix(sc.Text(), "ignored ")
			ign, err := strconv.ParseUint(mask, 16, 64)
			if !ok || err != nil {
				t.Fatalf("rank's first line %q: want its SigIgn mask", sc.Text())
			}
			for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT} {
				if ign&(1<<(sig-1)) != 0 {
					t.Errorf("the rank starts ignoring %s (SigIgn %s)", sig, mask)
				}
			}
		})
	}
}

// TestHostScriptWithoutEnvDefaultSignal: where env cannot reset a signal
// (GNU coreutils before 8.31, busybox) the ranks keep ignoring SIGINT, so
// a SIGINT to the script reaches them as SIGTERM rather than as a signal
// they would ignore until the KILL. The env on PATH here refuses
// --default-signal, as an old one does.
func TestHostScriptWithoutEnvDefaultSignal(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	realEnv, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	oldEnv := "#!/bin/sh\ncase \"$1\" in --default-signal*) echo \"env: unrecognized option '$1'\" >&2; exit 125;; esac\nexec " + realEnv + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "env"), []byte(oldEnv), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, sc := startScriptEnv(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, "--default-signal")
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "ignored ") {
		t.Fatalf("rank's first line %q: want its SigIgn mask", sc.Text())
	}
	if ign, err := strconv.ParseUint(strings.TrimPrefix(sc.Text(), "ignored "), 16, 64); err != nil || ign&(1<<(syscall.SIGINT-1)) == 0 {
		t.Fatalf("rank's SigIgn %q: with the old env the rank should still ignore SIGINT (else this test tests nothing)", sc.Text())
	}
	waitUp(t, sc)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	err = cmd.Wait()
	if len(got) != 1 || got[0] != "got TERM" {
		t.Errorf("the rank said %q after the script got SIGINT, want \"got TERM\"", got)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("script ended with %v, want status 130", err)
	}
}

// waitUp reads the rank's lines until it says up (within a minute).
func waitUp(t *testing.T, sc *bufio.Scanner) {
	t.Helper()
	up := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if sc.Text() == "up" {
				up <- true
				return
			}
		}
		up <- false
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatal("the script ended before its rank said up")
		}
	case <-time.After(time.Minute):
		t.Fatal("the rank did not say up within a minute")
	}
}
