package launch

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestNotifyContextNamesTheSignal: the cause of a context a signal ended is
// Signaled with that signal, reads as signal.NotifyContext's does, is a
// context.Canceled, and makes the stop pass the signal on; a plain cancel
// stops with TERM.
func TestNotifyContextNamesTheSignal(t *testing.T) {
	ctx, stop := NotifyContext(context.Background(), syscall.SIGUSR2)
	defer stop()
	if got := stopSignal(ctx); got != "TERM" {
		t.Errorf("stopSignal of a running context = %s, want TERM", got)
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGUSR2 did not end the context")
	}
	cause := context.Cause(ctx)
	var s Signaled
	if !errors.As(cause, &s) || s.Signal != syscall.SIGUSR2 || !errors.Is(cause, context.Canceled) ||
		cause.Error() != "user defined signal 2 signal received" {
		t.Errorf("cause = %#v (%v)", cause, cause)
	}
	if got := stopSignal(ctx); got != "USR2" {
		t.Errorf("stopSignal = %s, want USR2", got)
	}
	plain, cancel := context.WithCancel(context.Background())
	cancel()
	if got := stopSignal(plain); got != "TERM" {
		t.Errorf("stopSignal of a cancelled context = %s, want TERM", got)
	}
}

// TestAgentPassesOnTheStopSignal: the agent's watchdog sends the ranks the
// last signal name written on its stdin before the EOF, read line by line
// (no heartbeat) or in blocks among heartbeats; a name it does not pass on
// (KILL) is a TERM, as is an EOF alone.
func TestAgentPassesOnTheStopSignal(t *testing.T) {
	rank := `for s in TERM INT HUP QUIT USR1; do trap "echo got $s; exit 7" $s; done; echo up; while :; do sleep 0.1; done`
	for _, c := range []struct {
		name      string
		heartbeat int
		stdin     string
		want      string
	}{
		{"EOF alone", 0, "", "TERM"},
		{"INT", 0, "INT\n", "INT"},
		{"INT among heartbeats", 5, "\n\nINT\n", "INT"},
		{"the last name", 5, "\nHUP\n\nQUIT\n", "QUIT"},
		{"USR1, no heartbeat", 0, "\nUSR1\n", "USR1"},
		{"KILL is not passed on", 0, "KILL\n", "TERM"},
		{"heartbeats alone", 5, "\n\n", "TERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := job.HostJob{Name: "h", Ranks: []job.RankJob{{Rank: 0, Argv: []string{"/bin/sh", "-c", rank}}}}
			cmd, stdin, sc := startAgentHB(t, h, 2, c.heartbeat)
			pgidWhenRank0Up(t, sc)
			if _, err := stdin.Write([]byte(c.stdin)); err != nil {
				t.Fatal(err)
			}
			stdin.Close()
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			cmd.Wait()
			got := strings.Join(lines, "\n")
			if !strings.Contains(got, "0 got "+c.want+"\n") {
				t.Errorf("the rank did not get %s:\n%s", c.want, got)
			}
			if n := strings.Count(got, " got "); n != 1 {
				t.Errorf("the rank got %d signals, want one:\n%s", n, got)
			}
		})
	}
}
