package run

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// elasticArgs is an elastic line (--nnodes 2:4) for the checkpointing
// job on the test-bed's 4 hosts, 2 ranks each, its checkpoint in a
// directory every host shares.
func elasticArgs(tb *testbed.Testbed, dir, ckpt, port string, flags []string, script ...string) []string {
	args := []string{"pipette-launch", "run", "--nnodes", "2:4",
		"--hostfile", tb.HostsFile, "--nproc-per-node", "2", "--framework", "torch",
		"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile,
		"--python", cmdtest.BedPython, "--workdir", dir, "--stop-grace", "3s", "--heartbeat-timeout", "3s",
		"--master-port", port}
	args = append(append(args, flags...), filepath.Join(dir, "torch_elastic.py"), "--ckpt-dir", ckpt)
	return append(args, script...)
}

// TestElasticOnTestbed (issue 30): a real gloo job on 4 hosts x 2 ranks
// that checkpoints to a shared directory. node2's network is cut once the
// job has saved step 4: the job stops, restarts on the 3 hosts left from
// its last checkpoint and finishes, and nothing of it is left on any host
// (node2 included, once it is back). A script bug fails fast instead of
// burning restarts, and failures past --max-restarts stop the job with a
// summary that says so.
func TestElasticOnTestbed(t *testing.T) {
	t.Parallel() // its own test-bed, no environment set (run_testbed_test.go)
	tb, dir := e2eBed(t)
	copyExample(t, dir, "torch_elastic.py")
	ckptDir := func(t *testing.T) string {
		d, err := os.MkdirTemp(dir, "ckpt-")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}

	t.Run("lost host", func(t *testing.T) {
		ckpt := ckptDir(t)
		args := elasticArgs(tb, dir, ckpt, "29621", []string{"--max-restarts", "2"}, "--steps", "16", "--step-time", "0.5")
		var out, errOut syncbuf.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// The recovery timeline (bench/elastic reads these lines): the cut,
		// the loss declared (the restart line), the second attempt's first
		// rank up (its start-up is the job's own) and its first step.
		cut := make(chan []time.Time, 1)
		go func() {
			for !strings.Contains(out.String(), "SAVED step 4\n") {
				if ctx.Err() != nil {
					close(cut)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			if b, err := tb.Exec(ctx, "node2", "ip", "link", "set", "eth0", "down"); err != nil {
				t.Errorf("cut node2: %v %s", err, b)
			}
			cut <- timeline(ctx, time.Now(),
				func() bool { return strings.Contains(errOut.String(), "restarting on 3 hosts") },
				func() bool { return strings.Contains(errOut.String(), "6 ranks on 3 host(s)") },
				func() bool { return strings.Contains(out.String(), "RESUMED from step") },
				resumedAndStepped(&out))
		}()
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		marks, wasCut := <-cut
		defer restoreHost(t, tb, "node2")
		if !wasCut || code != 0 {
			t.Fatalf("exit %d (cut: %v)\nstdout:\n%s\nstderr:\n%s", code, wasCut, out.String(), errOut.String())
		}
		o, e := out.String(), errOut.String()
		// The second attempt: 6 ranks on node1, node3, node4, resumed
		// from a checkpoint at step 4 or later, finishing with the weight
		// every step added to (none lost, none counted twice).
		resumed := regexp.MustCompile(`node[134]:\d: RESUMED from step (\d+) world 6 restart 1`).FindAllStringSubmatch(o, -1)
		if step, _ := strconv.Atoi(firstMatch(resumed)); len(resumed) != 6 || step < 4 {
			t.Errorf("want 6 ranks resumed at step >= 4 on 6 ranks, got %v\nstdout:\n%s", resumed, o)
		}
		if n := strings.Count(o, "DONE step 16 w 16 world 6"); n != 6 {
			t.Errorf("%d ranks report DONE step 16 w 16 world 6, want 6\nstdout:\n%s", n, o)
		}
		if strings.Contains(o, "node2:") && strings.Contains(o[strings.Index(o, "RESUMED"):], "node2:") {
			t.Errorf("node2 ran in the second attempt\nstdout:\n%s", o)
		}
		for _, w := range []string{"finished on 3 hosts after 1 restart", "attempt 2 (restart 1): 3 hosts: node1 node3 node4",
			"dropped    : node2", "blamed     : node2 lost", "started    :", "first step :"} {
			if !strings.Contains(e, w) {
				t.Errorf("stderr lacks %q\nstderr:\n%s", w, e)
			}
		}
		// Steps redone, from the iteration lines: at most those since the
		// last checkpoint (one every 2 steps).
		if m := regexp.MustCompile(`redone     : (\d+) steps? \(the attempt before printed step \d+ last, this one step (\d+) first\)`).FindStringSubmatch(e); m == nil {
			t.Errorf("the summary does not say the steps redone\nstderr:\n%s", e)
		} else if n, _ := strconv.Atoi(m[1]); n > 2 {
			t.Errorf("%d steps redone, want at most the 2 since the last checkpoint\nstderr:\n%s", n, e)
		}
		if len(marks) == 5 {
			s := func(i int) float64 { return marks[i].Sub(marks[0]).Seconds() }
			startup := marks[3].Sub(marks[2]).Seconds() // python, torch and gloo coming up: the job's own
			t.Logf("TIMELINE heartbeat-timeout 3s, stop-grace 3s: cut -> loss declared %.1fs -> attempt 2 re-planned, probed and started %.1fs -> its first rank up %.1fs -> its first step %.1fs; cut to first step without the job's own start-up (%.1fs): %.1fs",
				s(1), s(2), s(3), s(4), startup, s(4)-startup)
		}
		t.Logf("stderr:\n%s", e)
	})

	t.Run("grows back", func(t *testing.T) {
		// node4 is cut off at start: the job starts on the other 3, node4
		// returns once it runs, and the job restarts right after its next
		// checkpoint to take node4 in (spending no restart: --max-restarts
		// 0), resumes from that checkpoint and finishes on 4.
		ckpt := ckptDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if b, err := tb.Exec(ctx, "node4", "ip", "link", "set", "eth0", "down"); err != nil {
			t.Fatalf("cut node4: %v %s", err, b)
		}
		args := elasticArgs(tb, dir, ckpt, "29624", []string{"--max-restarts", "0", "--rejoin-interval", "4s"}, "--steps", "40", "--step-time", "0.5")
		var out, errOut syncbuf.Buffer
		go func() {
			for !strings.Contains(out.String(), "iteration 3/40 world 6") {
				if ctx.Err() != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := tb.LinkUp("node4"); err != nil {
				t.Errorf("node4 back: %v", err)
			}
		}()
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		defer restoreHost(t, tb, "node4")
		o, e := out.String(), errOut.String()
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, o, e)
		}
		if n := strings.Count(o, "STARTED at step 0 world 6 restart 0"); n != 6 {
			t.Errorf("%d ranks started at step 0 on 6 ranks, want 6\nstdout:\n%s", n, o)
		}
		// The restart came right after a checkpoint, and resumed from it.
		saved := regexp.MustCompile(`stopped to take in node4 \(rejoined\): right after the job's checkpoint \(SAVED step (\d+)\)`).FindStringSubmatch(e)
		resumed := regexp.MustCompile(`node[1234]:\d: RESUMED from step (\d+) world 8 restart 0`).FindAllStringSubmatch(o, -1)
		if saved == nil || len(resumed) != 8 || firstMatch(resumed) != saved[1] {
			t.Errorf("want 8 ranks resumed on 8 ranks from the checkpoint the stop came after (%v), got %v\nstdout:\n%s\nstderr:\n%s", saved, resumed, o, e)
		}
		if !regexp.MustCompile(`node4:[67]: RESUMED from step`).MatchString(o) {
			t.Errorf("node4 did not run in the second attempt\nstdout:\n%s", o)
		}
		if n := strings.Count(o, "DONE step 40 w 40 world 8"); n != 8 {
			t.Errorf("%d ranks report DONE step 40 w 40 world 8, want 8\nstdout:\n%s", n, o)
		}
		for _, w := range []string{"finished on 4 hosts after 0 restarts and 1 grow-back restart",
			"attempt 1 (restart 0): 3 hosts: node1 node2 node3", "left out   : node4 failed its check",
			"attempt 2 (restart 0): 4 hosts: node1 node2 node3 node4", "added      : node4 (rejoined)",
			"started    :", "first step :", "redone     : 0 steps"} {
			if !strings.Contains(e, w) {
				t.Errorf("stderr lacks %q\nstderr:\n%s", w, e)
			}
		}
		t.Logf("stderr:\n%s", e)
	})

	t.Run("script bug fails fast", func(t *testing.T) {
		args := elasticArgs(tb, dir, ckptDir(t), "29622", []string{"--max-restarts", "5"}, "--steps", "6", "--step-time", "0.2", "--bug-at-step", "2")
		var out, errOut syncbuf.Buffer
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		e := errOut.String()
		if code != 1 || !strings.Contains(e, "STOPPED: the script's own bug") || !strings.Contains(e, "ValueError: bad batch at step 2") {
			t.Fatalf("exit %d, want 1 and a script bug\nstdout:\n%s\nstderr:\n%s", code, out.String(), e)
		}
		if n := strings.Count(e, "  attempt "); n > 2 {
			t.Errorf("%d attempts, want at most 2 (the same error twice is the script's)\nstderr:\n%s", n, e)
		}
		tb.AssertNothingLeft(t)
	})

	t.Run("past max restarts", func(t *testing.T) {
		// One host of four may be lost (MIN 3), and no restart is allowed.
		args := elasticArgs(tb, dir, ckptDir(t), "29623", []string{"--max-restarts", "0"}, "--steps", "40", "--step-time", "0.5")
		var out, errOut syncbuf.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		go func() {
			for !strings.Contains(out.String(), "SAVED step 2\n") && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			tb.Exec(ctx, "node3", "ip", "link", "set", "eth0", "down")
		}()
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		restoreHost(t, tb, "node3")
		e := errOut.String()
		if code != 1 || !strings.Contains(e, "STOPPED: 0 restarts done, --max-restarts 0") || !strings.Contains(e, "blamed     : node3 lost") {
			t.Fatalf("exit %d, want 1 and a stop past --max-restarts\nstdout:\n%s\nstderr:\n%s", code, out.String(), e)
		}
	})
}

// timeline is a recovery's marks as the output shows them: start, then
// when each of seen first held, in turn (until ctx ends).
func timeline(ctx context.Context, start time.Time, seen ...func() bool) []time.Time {
	marks := []time.Time{start}
	for _, s := range seen {
		for !s() && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		marks = append(marks, time.Now())
	}
	return marks
}

// resumedAndStepped: out shows a resumed job's first iteration line.
func resumedAndStepped(out *syncbuf.Buffer) func() bool {
	return func() bool {
		_, after, ok := strings.Cut(out.String(), "RESUMED from step")
		return ok && strings.Contains(after, "iteration ")
	}
}

func firstMatch(m [][]string) string {
	if len(m) == 0 {
		return ""
	}
	return m[0][1]
}

// restoreHost brings a cut host's link back, ends the sshd sessions that
// still hold our dead connections (their FIN was lost; not the listener),
// and checks that nothing of the job is left anywhere: no process, and no
// files directory or agent's directory in any host's own /tmp (the cut
// host's agent removes them itself: it is not reached again).
func restoreHost(t *testing.T, tb *testbed.Testbed, host string) {
	t.Helper()
	if err := tb.LinkUp(host); err != nil {
		t.Error(err)
	}
	tb.AssertNoFiles(t, 15*time.Second, "/tmp/pipette-launch-*", "/tmp/pipette-agent.*", "/tmp/pipette-status.*")
	tb.AssertNothingLeft(t)
}
