package elastic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// hostSwitch is a host's health as the scripted checks see it: down
// until set up, and how many checks of each host ran at once at most.
type hostSwitch struct {
	mu      sync.Mutex
	up      map[string]bool
	running map[string]int
	most    map[string]int
}

func newHostSwitch() *hostSwitch {
	return &hostSwitch{up: map[string]bool{}, running: map[string]int{}, most: map[string]int{}}
}

func (s *hostSwitch) set(host string, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.up[host] = up
}

func (s *hostSwitch) isUp(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up[host]
}

// check takes 20 ms (longer than the probe period the tests use), so
// that a second probe of a host while one runs would be seen.
func (s *hostSwitch) check(ctx context.Context, host string) error {
	s.mu.Lock()
	s.running[host]++
	s.most[host] = max(s.most[host], s.running[host])
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.running[host]--; s.mu.Unlock() }()
	select {
	case <-time.After(20 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if !s.isUp(host) {
		return errors.New("connect: no route to host")
	}
	return nil
}

// prepare fails, as the launch probe does, for hosts that are down.
func (s *hostSwitch) prepare(_ context.Context, hosts []string) (*Prepared, error) {
	he := &remote.HostErrors{}
	for _, h := range hosts {
		if !s.isUp(h) {
			he.Add(h, errors.New("dial tcp: i/o timeout"))
		}
	}
	if len(he.Errs) > 0 {
		return nil, fmt.Errorf("launch probe: %w", he)
	}
	return &Prepared{Job: fakeJob(hosts), Layout: fmt.Sprintf("DP=%d", len(hosts))}, nil
}

// wantAttempts checks each attempt's hosts and restart number, as
// "[[hosts...]...] [restarts...]".
func wantAttempts(t *testing.T, hosts [][]string, restarts []int, want string) {
	t.Helper()
	if got := fmt.Sprint(hosts) + " " + fmt.Sprint(restarts); got != want {
		t.Errorf("attempts and restarts %s, want %s", got, want)
	}
}

// stopped waits for the attempt to be stopped (at most 5 s) and returns
// what Launch returns then, and how long after since it came.
func stopped(ctx context.Context, since time.Time) (error, time.Duration) {
	select {
	case <-ctx.Done():
		return fmt.Errorf("job j FAILED: interrupted: %w", context.Cause(ctx)), time.Since(since)
	case <-time.After(5 * time.Second):
		return errors.New("never stopped"), time.Since(since)
	}
}

// notStoppedFor fails the test when the attempt is stopped within d.
func notStoppedFor(t *testing.T, ctx context.Context, d time.Duration, why string) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Errorf("the attempt was stopped %s: %v", why, context.Cause(ctx))
	case <-time.After(d):
	}
}

// TestGrowBack (issue 30, item 4): while an elastic job runs below MAX,
// the hosts left out are probed (never two probes of one host at once);
// one that answers is taken in by a restart right after the job's next
// checkpoint line, or --rejoin-interval after it answered when the job
// prints none, never sooner than --rejoin-interval into the attempt; the
// restart spends no --max-restarts, and a host that fails its check again
// as the job restarts is left out again at no cost.
func TestGrowBack(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	const interval = 300 * time.Millisecond
	opts := func(hs *hostSwitch, w *StepWatch) Options {
		return Options{Hosts: three, Min: 2, Max: 3, MaxRestarts: 0, Check: hs.check, Probe: hs.check, Prepare: hs.prepare, Steps: w,
			RejoinInterval: interval, ProbeEvery: 5 * time.Millisecond, ProbeTimeout: time.Second}
	}
	saved := func(w *StepWatch, step int) { fmt.Fprintf(w, "n1:0: SAVED step %d\n", step) }

	t.Run("waits for the checkpoint line", func(t *testing.T) {
		hs, w := newHostSwitch(), NewStepWatch(io.Discard)
		hs.set("n1", true)
		hs.set("n2", true) // n3 is cut off at start
		var waited time.Duration
		sum, err, hosts, restarts := runCtxScript(t, opts(hs, w), ctxScript{
			func(ctx context.Context, _ []string) error {
				saved(w, 2) // the job prints its checkpoints
				time.Sleep(interval)
				hs.set("n3", true)
				notStoppedFor(t, ctx, 3*interval, "with no checkpoint line since n3 answered")
				saved(w, 4)
				err, d := stopped(ctx, time.Now())
				waited = d
				return err
			},
			func(context.Context, []string) error { return nil },
		})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		wantAttempts(t, hosts, restarts, "[[n1 n2] [n1 n2 n3]] [0 0]") // a grow-back spends no restart
		if waited > time.Second {
			t.Errorf("stopped %s after the checkpoint line, want right after", waited)
		}
		for _, want := range []string{"j: finished on 3 hosts after 0 restarts and 1 grow-back restart",
			"left out   : n3 failed its check: dial tcp: i/o timeout",
			"ended      : stopped to take in n3 (rejoined): right after the job's checkpoint (SAVED step 4)",
			"attempt 2 (restart 0): 3 hosts: n1 n2 n3", "added      : n3 (rejoined)", "started    : 1s after the stop"} {
			if !strings.Contains(sum.String(), want) {
				t.Errorf("summary lacks %q:\n%s", want, sum)
			}
		}
		if hs.most["n3"] != 1 {
			t.Errorf("at most %d probes of n3 at once, want 1", hs.most["n3"])
		}
	})

	t.Run("falls back to the interval", func(t *testing.T) {
		hs, w := newHostSwitch(), NewStepWatch(io.Discard)
		hs.set("n1", true)
		hs.set("n2", true)
		var waited time.Duration
		sum, err, hosts, _ := runCtxScript(t, opts(hs, w), ctxScript{
			func(ctx context.Context, _ []string) error {
				fmt.Fprintf(w, "n1:0: iteration 1/10 world 4\n") // steps, no checkpoint
				hs.set("n3", true)
				err, d := stopped(ctx, time.Now())
				waited = d
				return err
			},
			func(context.Context, []string) error { return nil },
		})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		if fmt.Sprint(hosts) != "[[n1 n2] [n1 n2 n3]]" {
			t.Errorf("attempts on %v", hosts)
		}
		if waited < interval || waited > interval+time.Second {
			t.Errorf("stopped %s after n3 answered, want --rejoin-interval (%s) after", waited, interval)
		}
		if want := "stopped to take in n3 (rejoined): the job printed no checkpoint line within --rejoin-interval 300ms"; !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	})

	t.Run("rate-limited", func(t *testing.T) {
		// n3 and n4 are cut off at start and answer as soon as each
		// attempt starts, and the job saves a checkpoint every 10 ms: each
		// grow-back still comes only --rejoin-interval into its attempt.
		hs, w := newHostSwitch(), NewStepWatch(io.Discard)
		hs.set("n1", true)
		hs.set("n2", true)
		var ran []time.Duration
		growsBack := func(host string) func(ctx context.Context, _ []string) error {
			return func(ctx context.Context, _ []string) error {
				start := time.Now()
				hs.set(host, true)
				for step := 1; ctx.Err() == nil; step++ {
					saved(w, step)
					time.Sleep(10 * time.Millisecond)
				}
				ran = append(ran, time.Since(start))
				return fmt.Errorf("interrupted: %w", context.Cause(ctx))
			}
		}
		o := opts(hs, w)
		o.Hosts, o.Max = []string{"n1", "n2", "n3", "n4"}, 4
		sum, err, hosts, restarts := runCtxScript(t, o, ctxScript{growsBack("n3"), growsBack("n4"),
			func(context.Context, []string) error { return nil }})
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
		wantAttempts(t, hosts, restarts, "[[n1 n2] [n1 n2 n3] [n1 n2 n3 n4]] [0 0 0]")
		for i, d := range ran {
			if d < interval {
				t.Errorf("attempt %d stopped to grow back after %s, sooner than --rejoin-interval %s", i+1, d, interval)
			}
		}
		if !strings.Contains(sum.String(), "after 0 restarts and 2 grow-back restarts") {
			t.Errorf("summary:\n%s", sum)
		}
	})

	t.Run("a host flapping again mid-restart is left out again", func(t *testing.T) {
		hs, w := newHostSwitch(), NewStepWatch(io.Discard)
		hs.set("n1", true)
		hs.set("n2", true)
		sum, err, hosts, restarts := runCtxScript(t, opts(hs, w), ctxScript{
			func(ctx context.Context, _ []string) error {
				hs.set("n3", true)
				err, _ := stopped(ctx, time.Now())
				hs.set("n3", false) // down again before the restart's probe
				return err
			},
			func(context.Context, []string) error { return nil },
		})
		if err != nil {
			t.Fatalf("Run = %v (a grow-back that finds the host gone again spends no restart)", err)
		}
		wantAttempts(t, hosts, restarts, "[[n1 n2] [n1 n2]] [0 0]")
		s := sum.String()
		if !strings.Contains(s, "attempt 2 (restart 0): 2 hosts: n1 n2") || strings.Contains(s, "added") {
			t.Errorf("summary:\n%s", s)
		}
	})

	t.Run("at MAX nothing is probed", func(t *testing.T) {
		hs, w := newHostSwitch(), NewStepWatch(io.Discard)
		for _, h := range three {
			hs.set(h, true)
		}
		o := opts(hs, w)
		o.Max = 2 // n3 is spare, not left out: no probe, no restart
		_, err, hosts, _ := runCtxScript(t, o, ctxScript{
			func(ctx context.Context, _ []string) error {
				saved(w, 2)
				notStoppedFor(t, ctx, 2*interval, "at MAX")
				return nil
			},
		})
		if err != nil || fmt.Sprint(hosts) != "[[n1 n2]]" {
			t.Errorf("Run = %v on %v", err, hosts)
		}
		if len(hs.most) != 0 {
			t.Errorf("hosts probed at MAX: %v", hs.most)
		}
	})
}

// TestSaveLines: the checkpoint save lines a grow-back waits for, as the
// frameworks print them (launch prefixes "host:rank: "); DeepSpeed's
// commit line is a whole checkpoint once every rank of the attempt printed
// it for its tag.
func TestSaveLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		lines []string
		saves int
		last  string
	}{
		{name: "Megatron-LM", ranks: 8, lines: []string{
			"node1:0:   [2026-11-29 01:02:03.456789] successfully saved checkpoint from iteration     200 to /ckpt [ t 1/2, gtp_remat 0/1, p 1/1 ]"},
			saves: 1, last: "successfully saved checkpoint from iteration     200"},
		{name: "DeepSpeed, every rank", ranks: 2, lines: []string{
			"node1:0: [2026-11-29 01:02:03,456] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step10 is ready now!",
			"node2:1: [2026-11-29 01:02:03,457] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step10 is ready now!"},
			saves: 1, last: "[Torch] Checkpoint global_step10 is ready now!"},
		{name: "DeepSpeed, one rank of two: not whole yet", ranks: 2, lines: []string{
			"node1:0: [Torch] Checkpoint global_step10 is ready now!"}},
		{name: "examples/torch_elastic.py", ranks: 4, lines: []string{"node1:0: SAVED step 4", "node1:0: iteration 5/16 world 4"},
			saves: 1, last: "SAVED step 4"},
		{name: "a loaded checkpoint is no save", ranks: 1, lines: []string{
			"node1:0:  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at iteration 200"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewStepWatch(io.Discard)
			j := fakeJob([]string{"node1"})
			j.Hosts[0].Ranks = make([]job.RankJob, tc.ranks)
			w.Begin(j)
			for _, l := range tc.lines {
				fmt.Fprintln(w, l)
			}
			n, last := w.lastSaved()
			signalled := len(w.savedSignal()) == 1
			if n != tc.saves || last != tc.last || signalled != (tc.saves > 0) {
				t.Errorf("saves %d %q (signalled %v), want %d %q", n, last, signalled, tc.saves, tc.last)
			}
		})
	}
}
