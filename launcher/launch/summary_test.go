package launch

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

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

// TestLineRing; the splitting of output into lines is internal/lines'
// TestWriter.
func TestLineRing(t *testing.T) {
	r := &lineRing{max: 3}
	for i := range 5 {
		r.add(fmt.Sprint(i))
	}
	if got := strings.Join(r.lines(), ","); got != "2,3,4" {
		t.Errorf("ring = %s", got)
	}
}

func TestStopCommandIsPOSIX(t *testing.T) {
	got := stopCommand(1234, []int{99}, []int{1240, 1250}, 2*time.Second)
	for _, w := range []string{"kill -KILL -99", "kill -TERM -1234", "+ 2000))", "for g in -1234 -1240 -1250 -99; do kill -KILL $g", " 1234 1240 1250 99 "} {
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
	// A helper of the agent in its own session (its killer: a sleep, then
	// KILLs), which would outlive the agent.
	killer := exec.Command("setsid", "/bin/sh", "-c", "sleep 300; :")
	if err := killer.Start(); err != nil {
		t.Fatal(err)
	}
	go killer.Wait()
	// The killer the agent starts when the stop command's TERM reaches it,
	// named nowhere but by the agent's group last on its command line.
	unnamed := exec.Command("setsid", "/bin/sh", "-c", "sleep 300; :", "pipette-killer", "3", "/tmp/status", strconv.Itoa(grp.Process.Pid))
	if err := unnamed.Start(); err != nil {
		t.Fatal(err)
	}
	go unnamed.Wait()
	time.Sleep(200 * time.Millisecond)
	pgid, rpg, kpg := grp.Process.Pid, rank.Process.Pid, killer.Process.Pid
	start := time.Now()
	if out, err := exec.Command("/bin/sh", "-c", stopCommand(pgid, []int{kpg}, []int{rpg}, time.Second)).CombinedOutput(); err != nil {
		t.Fatalf("stop command: %v %s", err, out)
	}
	// Gone when it returns, not only signalled: no settling time here.
	if groupAlive(pgid) || groupAlive(rpg) || groupAlive(kpg) {
		t.Errorf("process group %d, %d or %d survived the stop command", pgid, rpg, kpg)
	}
	if groupAlive(unnamed.Process.Pid) {
		t.Errorf("the agent's unnamed killer (group %d) survived the stop command", unnamed.Process.Pid)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("stopped after %s: the TERM-ignoring member should have had the 1s grace", d)
	}
}
