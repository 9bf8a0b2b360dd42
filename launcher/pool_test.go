package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostErrorsSortedAndFolded(t *testing.T) {
	refused := errors.New("connect: connection refused")
	h := &HostErrors{}
	h.Add("node10", refused)
	h.Add("node2", fmt.Errorf("connect: connection refused"))
	h.Add("gpu1", &HostKeyMismatchError{Host: "198.18.250.1", KnownHostsFile: "kh", Fingerprint: "ssh-ed25519 SHA256:x", Lines: []int{3}})
	h.Add("node1", refused)
	want := "2 distinct errors:\n" +
		"  gpu1: HOST KEY MISMATCH for 198.18.250.1: it presented ssh-ed25519 SHA256:x, which differs from kh line 3; possible man-in-the-middle; refusing to connect (if the host was reinstalled, remove the old key with `ssh-keygen -R 198.18.250.1 -f kh`)\n" +
		"  node1, node2, node10: connect: connection refused"
	if got := h.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var mm *HostKeyMismatchError
	if !errors.As(h, &mm) || !errors.Is(h, refused) {
		t.Errorf("errors.As/Is do not see the hosts' errors")
	}
	one := &HostErrors{}
	one.Add("a", refused)
	one.Add("b", refused)
	if got := one.Error(); got != "a, b: connect: connection refused" {
		t.Errorf("single group = %q", got)
	}
	if (&HostErrors{}).ErrorOrNil() != nil {
		t.Errorf("empty HostErrors is not nil")
	}
}

// TestPoolErrorsNameHostsByPort: two hosts behind one address that cannot
// be reached are named apart.
func TestPoolErrorsNameHostsByPort(t *testing.T) {
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close() // nothing listens there now: connection refused
	}
	p := NewPool(SSHOptions{KnownHostsFile: "/dev/null", ConnectTimeout: 5 * time.Second}, 0)
	defer p.Close()
	err := p.DialAll(context.Background(), []HostTarget{{Name: "127.0.0.1", Port: ports[0]}, {Name: "127.0.0.1", Port: ports[1]}})
	var he *HostErrors
	if !errors.As(err, &he) || len(he.Errs) != 2 {
		t.Fatalf("DialAll = %v, want both hosts' errors", err)
	}
	got := map[string]bool{he.Errs[0].Host: true, he.Errs[1].Host: true}
	for _, pt := range ports {
		if want := fmt.Sprintf("127.0.0.1:%d", pt); !got[want] {
			t.Errorf("errors name %v, want %s among them: %v", got, want, err)
		}
	}
}

func TestHostLessNatural(t *testing.T) {
	in := []string{"node10", "node9", "gpu-a2", "node09x", "gpu-a10", "node1"}
	h := &HostErrors{}
	for _, n := range in {
		h.Add(n, errors.New("x"))
	}
	if got := strings.Join(h.Hosts(), " "); got != "gpu-a2 gpu-a10 node1 node9 node09x node10" {
		t.Errorf("sorted = %s", got)
	}
}

func TestPoolEachBoundsConcurrency(t *testing.T) {
	p := NewPool(SSHOptions{}, 3)
	var now, peak atomic.Int32
	var targets []HostTarget
	for i := range 20 {
		targets = append(targets, HostTarget{Name: fmt.Sprintf("h%d", i)})
	}
	err := p.Each(context.Background(), targets, func(ctx context.Context, t HostTarget) error {
		n := now.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		now.Add(-1)
		if t.Name == "h7" || t.Name == "h13" {
			return errors.New("boom")
		}
		return nil
	})
	if peak.Load() > 3 || peak.Load() < 2 {
		t.Errorf("peak concurrency %d, want at most the fanout 3", peak.Load())
	}
	if err == nil || err.Error() != "h7, h13: boom" {
		t.Errorf("err = %v", err)
	}
}

func TestJobFailureSummary(t *testing.T) {
	f := &JobFailure{Job: "gpt", Time: time.Date(2026, 11, 21, 5, 0, 1, 5e6, time.UTC), Host: "node3", Rank: 5, LocalRank: 1,
		ExitCode: 3, Reason: "exit code 3", LastLines: []string{"Traceback:", "boom"}, Restarts: 2}
	want := `gpt FAILED: rank 5 (local_rank 1) on node3 failed: exit code 3
Root Cause (earliest failure, by each host's clock corrected to ours):
  time      : 2026-11-21_05:00:01.005
  host      : node3
  rank      : 5 (local_rank: 1)
  exitcode  : 3
  reason    : exit code 3
  restarts  : 2
  last 2 lines of output:
    Traceback:
    boom
  every rank on every host was stopped`
	if got := f.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	f = &JobFailure{Job: "gpt", Time: f.Time, Rank: -1, ExitCode: -1, Reason: "interrupted: context canceled",
		interrupted: true, StopErr: errors.New("stop: node4: connection lost")}
	got := f.Error()
	for _, w := range []string{"gpt FAILED: interrupted: context canceled", "WARNING   : stop: node4: connection lost"} {
		if !strings.Contains(got, w) {
			t.Errorf("summary lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "rank      :") || strings.Contains(got, "exitcode") || f.restartable() {
		t.Errorf("interrupted summary:\n%s", got)
	}
}

func TestLineRingAndSplitter(t *testing.T) {
	r := &lineRing{max: 3}
	for i := range 5 {
		r.add(fmt.Sprint(i))
	}
	if got := strings.Join(r.lines(), ","); got != "2,3,4" {
		t.Errorf("ring = %s", got)
	}
	var lines []string
	s := &lineSplitter{fn: func(l string) { lines = append(lines, l) }}
	s.Write([]byte("a\nb"))
	s.Write([]byte("c\n\nd"))
	s.flush()
	if got := strings.Join(lines, "|"); got != "a|bc||d" {
		t.Errorf("lines = %q", got)
	}
}

func TestStopCommandIsPOSIX(t *testing.T) {
	got := stopCommand(1234, 99, []int{1240, 1250}, 2*time.Second)
	for _, w := range []string{"kill -KILL -99", "kill -TERM -1234", "-lt 20 ]", "for g in -1234 -1240 -1250; do kill -KILL $g", "$1 == 1250"} {
		if !strings.Contains(got, w) {
			t.Errorf("stop command lacks %q: %s", w, got)
		}
	}
	if strings.Contains(got, "-- -") {
		t.Errorf("dash's kill rejects --: %s", got)
	}

	// Run it for real (dash as /bin/sh) on a group with a TERM-ignoring member.
	grp := exec.Command("setsid", "/bin/sh", "-c", "trap '' TERM; sleep 300 & sleep 300")
	if err := grp.Start(); err != nil {
		t.Fatal(err)
	}
	go grp.Wait() // reap the leader, as setsid -w does for the agent
	// A rank's own session, also ignoring TERM.
	rank := exec.Command("setsid", "/bin/sh", "-c", "trap '' TERM; sleep 300")
	if err := rank.Start(); err != nil {
		t.Fatal(err)
	}
	go rank.Wait()
	time.Sleep(200 * time.Millisecond)
	pgid, rpg := grp.Process.Pid, rank.Process.Pid
	start := time.Now()
	if out, err := exec.Command("/bin/sh", "-c", stopCommand(pgid, 0, []int{rpg}, time.Second)).CombinedOutput(); err != nil {
		t.Fatalf("stop command: %v %s", err, out)
	}
	if groupAlive(pgid) || groupAlive(rpg) {
		t.Errorf("process group %d or %d survived the stop command", pgid, rpg)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("stopped after %s: the TERM-ignoring member should have had the 1s grace", d)
	}
}
