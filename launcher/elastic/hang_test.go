package elastic

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProgressWatch (issue 30, item 2): a job that printed iteration
// lines and then no new step for --progress-timeout is hung; the hosts
// whose ranks went silent while others printed on are the ones to blame,
// nobody when every host went silent; a job not yet printing iterations
// is not watched.
func TestProgressWatch(t *testing.T) {
	const timeout = 10 * time.Second
	type line struct {
		at   int // seconds after the start
		text string
	}
	for _, tc := range []struct {
		name   string
		lines  []line
		at     int    // when it is asked
		want   string // "" not hung, else the Hang's Silent hosts ("-": none)
		wantTo string // in the Hang's message
	}{
		{name: "no iteration line yet: not watched", lines: []line{{0, "n1:0: loading checkpoint"}}, at: 60},
		{name: "new steps keep it going", lines: []line{{0, "n1:0: iteration 1/9 world 6"}, {8, "n1:0: iteration 2/9 world 6"}}, at: 15},
		{name: "the same step again is no progress",
			lines: []line{{0, "n1:0: iteration 5/9 world 6"}, {8, "n1:0: iteration 5/9 world 6"}}, at: 11, want: "-",
			wantTo: "no new step for 10s (--progress-timeout 10s) after step 5; every host silent as long: no host to blame"},
		{name: "a host silent while the others print on is blamed",
			lines: []line{{0, "n1:0: iteration 3/9 world 6"}, {0, "n2:2: iteration 3/9 world 6"}, {0, "n3:4: iteration 3/9 world 6"},
				{5, "n1:1: [E ProcessGroupGloo.cpp] waiting for rank 2"}, {6, "n3:5: waiting"}},
			at: 12, want: "n2", wantTo: "n2 printed nothing for as long while the others printed on"},
		{name: "a host that never printed is not blamed",
			lines: []line{{0, "n1:0: iteration 3/9 world 6"}, {0, "n2:2: iteration 3/9 world 6"}, {7, "n1:1: waiting"}},
			at:    12, want: "n2"},
		{name: "a line of another job's rank or of pipette-launch is no host's",
			lines: []line{{0, "n1:0: iteration 3/9 world 6"}, {7, "n9:17: waiting"}, {7, "pipette-launch: note"}},
			at:    12, want: "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
			now := start
			w := NewStepWatch(io.Discard)
			w.now = func() time.Time { return now }
			w.Begin(fakeJob([]string{"n1", "n2", "n3"}))
			for _, l := range tc.lines {
				now = start.Add(time.Duration(l.at) * time.Second)
				fmt.Fprintln(w, l.text)
			}
			now = start.Add(time.Duration(tc.at) * time.Second)
			h := w.hung(timeout)
			switch {
			case tc.want == "" && h != nil:
				t.Fatalf("hung: %v", h)
			case tc.want == "":
				return
			case h == nil:
				t.Fatalf("not hung, want a hang blaming %s", tc.want)
			}
			if got := strings.Join(h.Silent, " "); got != strings.TrimPrefix(tc.want, "-") {
				t.Errorf("silent %q, want %q", got, strings.TrimPrefix(tc.want, "-"))
			}
			if !strings.Contains(h.Error(), tc.wantTo) {
				t.Errorf("%q lacks %q", h.Error(), tc.wantTo)
			}
			// The next attempt is watched afresh.
			w.Begin(fakeJob([]string{"n1", "n2", "n3"}))
			if h := w.hung(timeout); h != nil {
				t.Errorf("hung again right after Begin: %v", h)
			}
		})
	}
}

// TestHangInTheLoop: a hang stops the attempt (WatchProgress on real
// time) and is a failure: the silent host is left out, or, when every
// host went silent, the job restarts on the same hosts; it spends a
// restart, so with --max-restarts 0 the job stops saying why.
func TestHangInTheLoop(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	const timeout = 200 * time.Millisecond
	// hangs prints a step on every rank, then only the ranks of talking
	// hosts go on printing, until the attempt is stopped.
	hangs := func(w *StepWatch, talking ...string) func(ctx context.Context, hosts []string) error {
		return func(ctx context.Context, hosts []string) error {
			for i, h := range hosts {
				fmt.Fprintf(w, "%s:%d: iteration 4/9 world %d\n", h, 2*i, 2*len(hosts))
			}
			for ctx.Err() == nil {
				for i, h := range hosts {
					if strings.Contains(strings.Join(talking, " "), h) {
						fmt.Fprintf(w, "%s:%d: waiting for a peer\n", h, 2*i)
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			return fmt.Errorf("job j FAILED: interrupted: %w", context.Cause(ctx))
		}
	}
	for _, tc := range []struct {
		name        string
		maxRestarts int
		attempt     func(w *StepWatch) func(context.Context, []string) error
		wantHosts   string
		wantErr     string
		wantSummary []string
	}{
		{name: "a silent host is left out", maxRestarts: 1,
			attempt:   func(w *StepWatch) func(context.Context, []string) error { return hangs(w, "n1", "n3") },
			wantHosts: "[[n1 n2 n3] [n1 n3]]",
			wantSummary: []string{"ended      : the job hung: no new step for 200ms (--progress-timeout 200ms) after step 4; n2 printed nothing",
				"blamed     : n2 hung: its ranks printed nothing for 200ms while the others printed on", "attempt 2 (restart 1)"}},
		{name: "every host silent: the same hosts again", maxRestarts: 1,
			attempt:     func(w *StepWatch) func(context.Context, []string) error { return hangs(w) },
			wantHosts:   "[[n1 n2 n3] [n1 n2 n3]]",
			wantSummary: []string{"every host silent as long: no host to blame", "attempt 2 (restart 1): 3 hosts"}},
		{name: "a hang spends a restart", maxRestarts: 0,
			attempt:   func(w *StepWatch) func(context.Context, []string) error { return hangs(w) },
			wantHosts: "[[n1 n2 n3]]",
			wantErr:   "j STOPPED: 0 restarts done, --max-restarts 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewStepWatch(io.Discard)
			o := Options{Hosts: three, Min: 2, Max: 3, MaxRestarts: tc.maxRestarts, Steps: w, ProgressTimeout: timeout}
			s := ctxScript{tc.attempt(w)}
			if tc.wantErr == "" {
				s = append(s, func(context.Context, []string) error { return nil })
			}
			sum, err, hosts, _ := runCtxScript(t, o, s)
			if fmt.Sprint(hosts) != tc.wantHosts {
				t.Errorf("attempts on %v, want %s", hosts, tc.wantHosts)
			}
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Run = %v, want %q", err, tc.wantErr)
			}
			for _, want := range tc.wantSummary {
				if !strings.Contains(sum.String(), want) {
					t.Errorf("summary lacks %q:\n%s", want, sum)
				}
			}
		})
	}
}
