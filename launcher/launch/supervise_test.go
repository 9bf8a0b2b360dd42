package launch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/hostclock"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// A host whose agent finished without every rank's exit status is a
// failure naming the silent rank, never a success.
func TestSuperviseNeedsEveryRanksExit(t *testing.T) {
	j := job.Job{Name: "j"}
	h := &hostRun{target: remote.HostTarget{Name: "node1"}, done: true,
		job: job.HostJob{Name: "node1", Ranks: []job.RankJob{{Rank: 0, LocalRank: 0}, {Rank: 1, LocalRank: 1}}}}
	opts := Options{}.withDefaults()
	for _, tc := range []struct {
		name     string
		exits    []int
		wantFail bool
	}{
		{"all reported", []int{0, 1}, false},
		{"rank 1 lost", []int{0}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := make(chan event, 4)
			for _, r := range tc.exits {
				events <- event{kind: evRankExit, host: h, rank: r, code: 0, at: time.Now()}
			}
			events <- event{kind: evHostEnded, host: h, at: time.Now()}
			f := supervise(context.Background(), j, []*hostRun{h}, events, opts, nil)
			if (f != nil) != tc.wantFail {
				t.Fatalf("failure = %v, want failure %v", f, tc.wantFail)
			}
			if f != nil && (f.Host != "node1" || f.Rank != 1 || f.LocalRank != 1) {
				t.Errorf("failure names %s rank %d (local %d), want node1 rank 1 (local 1)", f.Host, f.Rank, f.LocalRank)
			}
		})
	}
}

// The root cause is the earliest failure by the hosts' own clocks, each
// corrected by its measured offset, whatever order the reports arrive in;
// ranks that ended once we stopped the job are counted, never blamed.
func TestRootCauseEarliestByCorrectedClock(t *testing.T) {
	j := job.Job{Name: "j"}
	base := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	mk := func(name string, offset time.Duration, ranks ...int) *hostRun {
		h := &hostRun{target: remote.HostTarget{Name: name}, job: job.HostJob{Name: name},
			clock: hostclock.Offset{Offset: offset, Known: true}}
		for i, r := range ranks {
			h.job.Ranks = append(h.job.Ranks, job.RankJob{Rank: r, LocalRank: i})
		}
		return h
	}
	// node1's clock is 5 s behind ours, node3's 2 s ahead: by raw stamps
	// rank 0 (on node1) would look first.
	node1, node2, node3 := mk("node1", -5*time.Second, 0, 1), mk("node2", 0, 2, 3), mk("node3", 2*time.Second, 4, 5)
	stamp := func(h *hostRun, after time.Duration) string {
		return strconv.FormatInt(base.Add(h.clock.Offset+after).UnixNano(), 10)
	}
	opts := Options{}.withDefaults()
	events := make(chan event, 16)
	line := func(h *hostRun, rank, code int, after time.Duration) {
		handleAgentLine(h, fmt.Sprintf("%d @@pipette-N %s %d %d %s", rank, "exit", rank, code, stamp(h, after)), "@@pipette-N ", opts, nil, events)
	}
	// Arrival order: the cascade first, the culprit (rank 5, exit 3 at
	// +0) later, then a rank that ended by our TERM.
	line(node1, 0, 1, 150*time.Millisecond)
	line(node2, 2, 1, 120*time.Millisecond)
	line(node3, 5, 3, 0)
	line(node2, 3, 0, 50*time.Millisecond) // a rank that had finished fine
	sv := newSupervisor(j, []*hostRun{node1, node2, node3}, events, opts, nil)
	first := sv.record(<-events)
	if first == nil || first.Rank != 0 {
		t.Fatalf("first observed = %+v, want rank 0's report", first)
	}
	for len(events) > 0 {
		sv.record(<-events)
	}
	node3.stopAt = base.Add(time.Second) // we stopped the job at +1 s
	line(node3, 4, 143, 1200*time.Millisecond)
	sv.record(<-events)
	f := sv.rootCause(first)
	if f.Host != "node3" || f.Rank != 5 || f.LocalRank != 1 || f.ExitCode != 3 || !f.Time.Equal(base) {
		t.Errorf("root cause = %s rank %d (local %d) exit %d at %v, want node3 rank 5 (local 1) exit 3 at %v",
			f.Host, f.Rank, f.LocalRank, f.ExitCode, f.Time, base)
	}
	if fmt.Sprint(f.FailedAfter) != "[2 0]" || f.StoppedAfter != 1 {
		t.Errorf("after = %v, stopped %d; want [2 0] (in time order) and 1", f.FailedAfter, f.StoppedAfter)
	}
	msg := f.Error()
	if !strings.Contains(msg, "after it  : 2 more ranks failed on their own (ranks 2, 0); 1 rank ended non-zero when pipette-launch stopped the job") {
		t.Errorf("summary:\n%s", msg)
	}

	// Without the clock correction (offsets unknown), rank 0's raw stamp
	// is 5 s early and it would be blamed: the offset is what names rank 5.
	node1.clock, node3.clock = hostclock.Offset{}, hostclock.Offset{}
	sv = newSupervisor(j, []*hostRun{node1, node2, node3}, events, opts, nil)
	line(node1, 0, 1, 150*time.Millisecond-5*time.Second)
	line(node3, 5, 3, 2*time.Second)
	first = sv.record(<-events)
	sv.record(<-events)
	if f := sv.rootCause(first); f.Rank != 0 {
		t.Errorf("with unknown offsets the raw stamps decide: got rank %d, want 0", f.Rank)
	}
}

// A host's clock line that reaches us late (a busy host: seconds between
// its date and our read) must not push its exit stamps later: both hosts
// here share our clock, node3's line arrived 3 s after it was stamped,
// node1's at once. Rank 5 (node3) failed 100 ms before rank 1 (node1),
// whose report came first: rank 5 is the root cause.
func TestRootCauseClockLineArrivesLate(t *testing.T) {
	j := job.Job{Name: "j"}
	t0 := time.Date(2026, 11, 25, 20, 24, 0, 0, time.UTC)
	now := t0
	opts := Options{Now: func() time.Time { return now }}.withDefaults()
	events := make(chan event, 8)
	node1 := &hostRun{target: remote.HostTarget{Name: "node1"}, sentAt: t0,
		job: job.HostJob{Name: "node1", Ranks: []job.RankJob{{Rank: 0, LocalRank: 0}, {Rank: 1, LocalRank: 1}}}}
	node3 := &hostRun{target: remote.HostTarget{Name: "node3"}, sentAt: t0,
		job: job.HostJob{Name: "node3", Ranks: []job.RankJob{{Rank: 4, LocalRank: 0}, {Rank: 5, LocalRank: 1}}}}
	ns := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixNano(), 10) }
	tag := "@@pipette-N "
	// Both agents read their clock 500 ms after we started them.
	now = t0.Add(600 * time.Millisecond)
	handleAgentLine(node1, tag+"clock "+ns(500*time.Millisecond), tag, opts, nil, events)
	now = t0.Add(3500 * time.Millisecond)
	handleAgentLine(node3, tag+"clock "+ns(500*time.Millisecond), tag, opts, nil, events)
	now = t0.Add(20 * time.Second)
	handleAgentLine(node1, "1 "+tag+"exit 1 1 "+ns(10100*time.Millisecond)+" 0", tag, opts, nil, events)
	handleAgentLine(node3, "5 "+tag+"exit 5 3 "+ns(10*time.Second)+" 0", tag, opts, nil, events)
	sv := newSupervisor(j, []*hostRun{node1, node3}, events, opts, nil)
	first := sv.record(<-events)
	sv.record(<-events)
	f := sv.rootCause(first)
	if f.Host != "node3" || f.Rank != 5 || !f.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("root cause = %s rank %d at %v, want node3 rank 5 at %v (node3's offset %s, node1's %s)",
			f.Host, f.Rank, f.Time, t0.Add(10*time.Second), node3.clock.Offset, node1.clock.Offset)
	}
}

// TestRootCausePeerLossYieldsToOwnFailure is the cascade seen in a full CI
// run at load 30: rank 5 exits 3, rank 1's barrier fails with "Connection
// closed by peer" because of it, but busy node3 stamps rank 5's exit 200 ms
// after node1 stamps rank 1's. Within that uncertainty the rank that failed
// on its own is the root cause; outside it, the earliest stamp still wins.
func TestRootCausePeerLossYieldsToOwnFailure(t *testing.T) {
	cases := []struct {
		name     string
		rank5At  time.Duration // rank 5's stamp, rank 1's is at 10 s
		rank5By  string        // the agent's flag: stopping had begun when rank 5's wrapper noted its end
		stopAt   time.Duration // when we stopped node3 (0: not stopped)
		wantRank int
	}{
		{"own failure stamped 200 ms after the peer loss", 10200 * time.Millisecond, "0", 0, 5},
		{"own failure stamped 4 s after the peer loss (a busy host)", 14 * time.Second, "0", 0, 5},
		{"own failure stamped 20 s after the peer loss", 30 * time.Second, "0", 0, 1},
		// Rank 5's wrapper noted its exit 3 after node3's agent (and we)
		// had begun stopping: exit 3 is still its own, not our TERM's.
		{"own exit code noted after the stop began", 12 * time.Second, "1", 11 * time.Second, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := job.Job{Name: "j", Hosts: []job.HostJob{
				{Name: "node1", Ranks: []job.RankJob{{Rank: 0, LocalRank: 0}, {Rank: 1, LocalRank: 1}}},
				{Name: "node3", Ranks: []job.RankJob{{Rank: 4, LocalRank: 0}, {Rank: 5, LocalRank: 1}}},
			}}
			t0 := time.Date(2026, 11, 25, 20, 24, 0, 0, time.UTC)
			now := t0
			var sb strings.Builder
			opts := Options{Now: func() time.Time { return now }, Out: &sb}.withDefaults()
			out := newOutput(j, opts)
			events := make(chan event, 8)
			node1 := &hostRun{target: remote.HostTarget{Name: "node1"}, sentAt: t0, job: j.Hosts[0]}
			node3 := &hostRun{target: remote.HostTarget{Name: "node3"}, sentAt: t0, job: j.Hosts[1]}
			ns := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixNano(), 10) }
			tag := "@@pipette-N "
			now = t0.Add(100 * time.Millisecond)
			handleAgentLine(node1, tag+"clock "+ns(50*time.Millisecond), tag, opts, nil, events)
			handleAgentLine(node3, tag+"clock "+ns(50*time.Millisecond), tag, opts, nil, events)
			out.rankLine("node1", 1, "rank 1: barrier failed: [./gloo/transport/tcp/pair.cc:598] Connection closed by peer [198.18.2.13]:16606")
			out.rankLine("node3", 5, "rank 5: exiting with 3")
			now = t0.Add(40 * time.Second)
			handleAgentLine(node1, "1 "+tag+"exit 1 1 "+ns(10*time.Second)+" 0", tag, opts, nil, events)
			if c.stopAt > 0 {
				node3.stopAt = t0.Add(c.stopAt)
			}
			handleAgentLine(node3, "5 "+tag+"exit 5 3 "+ns(c.rank5At)+" "+c.rank5By, tag, opts, nil, events)
			sv := newSupervisor(j, []*hostRun{node1, node3}, events, opts, out)
			first := sv.record(<-events)
			sv.record(<-events)
			if f := sv.rootCause(first); f.Rank != c.wantRank {
				t.Errorf("root cause = %s rank %d, want rank %d", f.Host, f.Rank, c.wantRank)
			}
		})
	}
}
