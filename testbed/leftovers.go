package testbed

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// Leftovers lists what still runs on the hosts besides sshd, as
// "host: pid cmdline", waiting up to settle for processes that are on their
// way out: sshd's per-connection children and exiting processes (empty
// cmdline) linger briefly after a client disconnects, and zombies waiting for
// init to reap them are already dead. Tests use it to prove a job left
// nothing running.
func (tb *Testbed) Leftovers(settle time.Duration) ([]string, error) {
	deadline := time.Now().Add(settle)
	for {
		left, lingering, err := tb.scanLeftovers()
		if err != nil {
			return nil, err
		}
		if len(lingering) == 0 || time.Now().After(deadline) {
			return append(left, lingering...), nil
		}
		if len(left) > 0 {
			return left, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scanLeftovers splits live non-sshd processes into those that must not be
// there (left) and those that may still be exiting (lingering).
func (tb *Testbed) scanLeftovers() (left, lingering []string, err error) {
	for _, h := range tb.Names() {
		procs, err := tb.Processes(h)
		if err != nil {
			return nil, nil, fmt.Errorf("processes on %s: %w", h, err)
		}
		for _, p := range procs {
			if isZombieOrGone(p.Pid) {
				continue
			}
			desc := fmt.Sprintf("%s: pid %d %q", h, p.Pid, p.Cmdline)
			if strings.HasPrefix(p.Cmdline, "sshd") || strings.HasPrefix(p.Cmdline, "/usr/sbin/sshd") || p.Cmdline == "" {
				lingering = append(lingering, desc)
			} else {
				left = append(left, desc)
			}
		}
	}
	return left, lingering, nil
}

func isZombieOrGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	return strings.HasPrefix(strings.TrimSpace(s[strings.LastIndexByte(s, ')')+1:]), "Z")
}

// AssertNoFiles fails t for each host where a path matching one of globs
// (shell patterns, as a login there sees its files: its own /tmp) is left,
// waiting up to settle for processes still on their way out to remove
// theirs (the agent of a host a launcher lost, say).
func (tb *Testbed) AssertNoFiles(t testing.TB, settle time.Duration, globs ...string) {
	t.Helper()
	deadline := time.Now().Add(settle)
	for {
		left, err := tb.filesLeft(globs)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, l := range left {
				t.Errorf("left on %s", l)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// filesLeft lists the paths matching globs on each host, as "host: paths".
func (tb *Testbed) filesLeft(globs []string) ([]string, error) {
	var left []string
	const list = `for g in "$@"; do for p in $g; do [ -e "$p" ] && echo "$p"; done; done; true`
	for _, h := range tb.Names() {
		out, err := tb.ExecInHost(context.Background(), h, append([]string{"/bin/sh", "-c", list, "sh"}, globs...)...)
		if err != nil {
			return nil, fmt.Errorf("files on %s: %w", h, err)
		}
		if s := strings.Fields(string(out)); len(s) > 0 {
			left = append(left, h+": "+strings.Join(s, " "))
		}
	}
	return left, nil
}

// AssertNothingLeft fails t for every process a job left running on any
// host (see Leftovers).
func (tb *Testbed) AssertNothingLeft(t testing.TB) {
	t.Helper()
	left, err := tb.Leftovers(3 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range left {
		t.Errorf("left running on %s", l)
	}
}

// WaitNothingLeft waits (up to limit) until nothing is left on the hosts.
// A cut-off host's agent stops its ranks by itself (TERM, KILL after the
// grace) once its session ends or its heartbeat times out, which can still
// be under way when Slurm's steps are gone. Tests call AssertNothingLeft
// after it, which then still fails for a process that never ends.
func (tb *Testbed) WaitNothingLeft(limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if left, err := tb.Leftovers(0); err != nil || len(left) == 0 {
			return
		}
	}
}
