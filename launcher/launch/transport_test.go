package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// localJob is a one-host job of sh ranks: rank r runs scripts[r] with its
// pid written to dir/pid.R first (so a test can tell it is gone).
func localJob(dir string, scripts ...string) job.Job {
	j := job.Job{Name: "local", WorkDir: dir,
		Files: []job.File{{Path: "sub/data.txt", Content: []byte("from the job\n")}}}
	h := job.HostJob{Name: "localhost"}
	for r, s := range scripts {
		h.Ranks = append(h.Ranks, job.RankJob{Rank: r, LocalRank: r,
			Env:  []job.EnvVar{{Name: "RANK", Value: strconv.Itoa(r)}},
			Argv: []string{"/bin/sh", "-c", "echo $$ >pid.$RANK; " + s}})
	}
	j.Hosts = []job.HostJob{h}
	return j
}

// assertGone fails when a rank whose pid file is in dir still runs.
func assertGone(t *testing.T, dir string) {
	t.Helper()
	pids, _ := filepath.Glob(filepath.Join(dir, "pid.*"))
	if len(pids) == 0 {
		t.Fatalf("no rank wrote its pid in %s", dir)
	}
	for _, f := range pids {
		b, _ := os.ReadFile(f)
		pid := strings.TrimSpace(string(b))
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			t.Errorf("rank %s (pid %s) still runs: %s", filepath.Ext(f)[1:], pid, stat)
		}
	}
}

// TestLaunchLocal runs jobs on this machine without SSH (no sshd is
// involved): the same agent, output, failure summary and stop as over SSH.
func TestLaunchLocal(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		dir := t.TempDir()
		job := localJob(dir, `cat sub/data.txt; echo "rank $RANK of pid $$"`, `echo "rank $RANK done" >&2`)
		var out syncbuf.Buffer
		logDir := t.TempDir()
		if err := Launch(context.Background(), job, Options{Local: true, Out: &out, LogDir: logDir}); err != nil {
			t.Fatalf("Launch: %v\n%s", err, out.String())
		}
		for _, want := range []string{"localhost:0: from the job", "localhost:0: rank 0 of pid", "localhost:1: rank 1 done"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		if b, err := os.ReadFile(filepath.Join(logDir, "localhost.1.log")); err != nil || !strings.Contains(string(b), "rank 1 done") {
			t.Errorf("log of rank 1: %q, %v", b, err)
		}
		assertGone(t, dir)
	})
	t.Run("a failing rank stops the other", func(t *testing.T) {
		dir := t.TempDir()
		job := localJob(dir, `echo sleeping; exec sleep 60`, `sleep 1; echo "failing on purpose" >&2; exit 3`)
		var out syncbuf.Buffer
		start := time.Now()
		err := Launch(context.Background(), job, Options{Local: true, Out: &out, Grace: 2 * time.Second})
		var jf *JobFailure
		if !errors.As(err, &jf) {
			t.Fatalf("Launch = %v, want a *JobFailure\n%s", err, out.String())
		}
		if jf.Rank != 1 || jf.ExitCode != 3 || jf.Host != "localhost" {
			t.Errorf("root cause rank %d exit %d on %s, want rank 1 exit 3 on localhost\n%v", jf.Rank, jf.ExitCode, jf.Host, err)
		}
		if !strings.Contains(err.Error(), "failing on purpose") {
			t.Errorf("summary lacks the rank's last lines:\n%v", err)
		}
		if took := time.Since(start); took > 40*time.Second {
			t.Errorf("took %s: the sleeping rank was not stopped", took)
		}
		assertGone(t, dir)
	})
	t.Run("a restart after a failure", func(t *testing.T) {
		dir := t.TempDir()
		// Rank 1 fails only once rank 0 has said its line: else the stop
		// may reach rank 0 before its echo (seen in CI at load 8).
		job := localJob(dir, `echo "attempt $TORCHELASTIC_RESTART_COUNT"; : >said.$TORCHELASTIC_RESTART_COUNT`,
			`while [ ! -e said.$TORCHELASTIC_RESTART_COUNT ]; do sleep 0.05; done; [ "$TORCHELASTIC_RESTART_COUNT" -ge 1 ] || exit 4; echo recovered`)
		var out syncbuf.Buffer
		if err := Launch(context.Background(), job, Options{Local: true, Out: &out, MaxRestarts: 1, Grace: 2 * time.Second}); err != nil {
			t.Fatalf("Launch: %v\n%s", err, out.String())
		}
		for _, want := range []string{"localhost:0: attempt 0", "restarting the whole job (restart 1 of 1)", "localhost:0: attempt 1", "localhost:1: recovered"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
		assertGone(t, dir)
	})
	t.Run("cancel stops every rank", func(t *testing.T) {
		dir := t.TempDir()
		job := localJob(dir, `echo up; exec sleep 60`, `trap 'echo got TERM; exit 7' TERM; echo up; while :; do sleep 0.1; done`)
		var out syncbuf.Buffer
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for strings.Count(out.String(), ": up") < 2 {
				time.Sleep(50 * time.Millisecond)
			}
			cancel()
		}()
		err := Launch(ctx, job, Options{Local: true, Out: &out, Grace: 2 * time.Second})
		var jf *JobFailure
		if !errors.As(err, &jf) || !jf.Interrupted() {
			t.Fatalf("Launch = %v, want an interrupted *JobFailure\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "localhost:1: got TERM") {
			t.Errorf("rank 1 did not get a graceful TERM:\n%s", out.String())
		}
		assertGone(t, dir)
	})
	// torchrun's agent passes on the signal that stopped it: ^C reaches
	// the ranks as SIGINT (a KeyboardInterrupt in Python), SIGUSR1 from
	// --signals-to-handle as SIGUSR1. Not SIGHUP here: a local agent's
	// ranks inherit this process's dispositions, and under nohup (as CI
	// may run) they ignore it, as torchrun's workers would.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGUSR1} {
		name := job.StopSignalName(sig)
		t.Run("SIG"+name+" reaches every rank", func(t *testing.T) {
			dir := t.TempDir()
			rank := `for s in TERM INT HUP USR1; do trap "echo got $s; exit 7" $s; done; echo up; while :; do sleep 0.1; done`
			job := localJob(dir, rank, rank)
			var out syncbuf.Buffer
			ctx, cancel := context.WithCancelCause(context.Background())
			go func() {
				for strings.Count(out.String(), ": up") < 2 {
					time.Sleep(50 * time.Millisecond)
				}
				cancel(Signaled{Signal: sig})
			}()
			err := Launch(ctx, job, Options{Local: true, Out: &out, Grace: 2 * time.Second})
			var jf *JobFailure
			if !errors.As(err, &jf) || !jf.Interrupted() || !strings.Contains(err.Error(), sig.String()+" signal received") {
				t.Fatalf("Launch = %v, want an interrupted *JobFailure naming the signal\n%s", err, out.String())
			}
			for r := range 2 {
				if want := "localhost:" + strconv.Itoa(r) + ": got " + name; !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
			assertGone(t, dir)
		})
	}
}

// TestLaunchLocalRemovesFilesDir (issue 21): the job's own files directory
// is gone once Launch returns, whether the job succeeded, a rank failed or
// it was interrupted; KeepFiles keeps it.
func TestLaunchLocalRemovesFilesDir(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rank   string // rank 0's script; it reads the job's file first
		cancel bool
		keep   bool
	}{
		{"success", `echo done`, false, false},
		{"failure", `exit 3`, false, false},
		{"interrupt", `echo up; exec sleep 60`, true, false},
		{"kept", `echo done`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := filepath.Join(t.TempDir(), "pipette-launch-local-1")
			job := localJob(dir, `cat `+filepath.Join(files, "sub/data.txt")+`; `+tc.rank)
			job.FilesDir = files
			var out syncbuf.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				go func() {
					for !strings.Contains(out.String(), ": up") {
						time.Sleep(50 * time.Millisecond)
					}
					cancel()
				}()
			}
			err := Launch(ctx, job, Options{Local: true, Out: &out, Grace: 2 * time.Second, KeepFiles: tc.keep})
			if (err == nil) != (tc.rank == `echo done`) {
				t.Fatalf("Launch = %v\n%s", err, out.String())
			}
			if !strings.Contains(out.String(), "localhost:0: from the job") {
				t.Fatalf("rank 0 did not read the job's file:\n%s", out.String())
			}
			if _, err := os.Lstat(files); os.IsNotExist(err) == tc.keep {
				t.Errorf("files directory %s: %v; want kept: %v\n%s", files, err, tc.keep, out.String())
			}
			assertGone(t, dir)
		})
	}
}
