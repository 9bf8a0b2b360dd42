package kubernetes

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// TestLineSorting: a pod's log lines as the host script writes them under
// run (job.WithControl) become host:rank: output, rank exits, or
// nothing (the script's own control lines).
func TestLineSorting(t *testing.T) {
	const tag = "@@pipette-0123456789abcdef"
	pod := k8s.Pod{Name: "j-cpu-0-1", Host: "cpu-1", NodeRank: 1, Ranks: []int{2, 3}}
	m := &k8s.Manifests{Name: "j", Pods: []k8s.Pod{pod}}
	cases := []struct {
		line     string
		out      string
		exitRank int
		code     int
		byUs     bool
	}{
		{line: tag + " clock 1764096000000000000", exitRank: -1},
		{line: tag + " ranks 101 102", exitRank: -1},
		{line: "3 ALLREDUCE OK rank=3 sum=10", out: "j-cpu-0-1:3: ALLREDUCE OK rank=3 sum=10\n", exitRank: -1},
		{line: "3 " + tag + " exit 3 7 1764096000000000000 0", exitRank: 3, code: 7},
		{line: "2 " + tag + " exit 2 143 1764096000000000000 1", exitRank: 2, code: 143, byUs: true},
		// A rank's own line that looks like a control line without the tag is output.
		{line: "2 @@pipette-guess exit 2 0", out: "j-cpu-0-1:2: @@pipette-guess exit 2 0\n", exitRank: -1},
		// Not a rank of this pod: the pod's own output.
		{line: "9 hello", out: "j-cpu-0-1: 9 hello\n", exitRank: -1},
		{line: "pipette-launch: pod cpu/5 is not in the plan", out: "j-cpu-0-1: pipette-launch: pod cpu/5 is not in the plan\n", exitRank: -1},
	}
	for _, c := range cases {
		var out syncBuffer
		s := newSupervisor(m, tag, Options{Out: &out})
		s.line(pod, c.line)
		if out.String() != c.out {
			t.Errorf("%q printed %q, want %q", c.line, out.String(), c.out)
		}
		select {
		case ev := <-s.events:
			if ev.rank != c.exitRank || ev.code != c.code || ev.byUs != c.byUs {
				t.Errorf("%q: exit event %+v, want rank %d code %d byUs %v", c.line, ev, c.exitRank, c.code, c.byUs)
			}
		default:
			if c.exitRank >= 0 {
				t.Errorf("%q: no exit event, want rank %d", c.line, c.exitRank)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the log streams' goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The wait for a deleted JobSet's pods covers their grace: a long
// --stop-grace is waited out, not reported as pods left behind.
func TestDefaultStopTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		podGrace int
		want     time.Duration
	}{{0, 3 * time.Minute}, {45, 3 * time.Minute}, {60, 3 * time.Minute}, {615, 615*time.Second + 2*time.Minute}} {
		if got := defaultStopTimeout(&k8s.Manifests{PodGraceSeconds: tc.podGrace}); got != tc.want {
			t.Errorf("pods' grace %d s: wait %s, want %s", tc.podGrace, got, tc.want)
		}
	}
}
