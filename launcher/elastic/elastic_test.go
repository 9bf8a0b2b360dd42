package elastic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// fakeJob is a job of two ranks on each host.
func fakeJob(hosts []string) *job.Job {
	j := &job.Job{Name: "j"}
	for i, h := range hosts {
		j.Hosts = append(j.Hosts, job.HostJob{Name: h, NodeRank: i, Ranks: []job.RankJob{{Rank: 2 * i}, {Rank: 2*i + 1, LocalRank: 1}}})
	}
	return j
}

func rankFails(host string, rank, code int, last string) error {
	return &launch.JobFailure{Job: "j", Host: host, Rank: rank, ExitCode: code, Reason: fmt.Sprintf("exited with code %d", code), LastLines: []string{"Traceback", last}}
}

// script is a run of attempts: each attempt's outcome, given its hosts.
type script []func(hosts []string) error

// runScript runs the loop over script, recording the hosts of each
// attempt, the restart numbers Launch got and what Prepare was asked.
func runScript(t *testing.T, o Options, s script) (*Summary, error, [][]string, []int) {
	t.Helper()
	cs := make(ctxScript, len(s))
	for i, f := range s {
		cs[i] = func(_ context.Context, hosts []string) error { return f(hosts) }
	}
	return runCtxScript(t, o, cs)
}

// ctxScript is a run of attempts that see their context: a grow-back
// stops an attempt by cancelling it.
type ctxScript []func(ctx context.Context, hosts []string) error

func runCtxScript(t *testing.T, o Options, s ctxScript) (*Summary, error, [][]string, []int) {
	t.Helper()
	var attempts [][]string
	var restarts []int
	clock := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	o.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
	if o.Prepare == nil {
		o.Prepare = func(_ context.Context, hosts []string) (*Prepared, error) {
			return &Prepared{Job: fakeJob(hosts), Layout: fmt.Sprintf("DP=%d", len(hosts))}, nil
		}
	}
	o.Launch = func(ctx context.Context, j *job.Job, restart, attempt int) error {
		hosts := hostNames(j)
		if attempt != len(attempts) {
			t.Errorf("attempt %d launched as attempt %d", len(attempts), attempt)
		}
		attempts = append(attempts, hosts)
		restarts = append(restarts, restart)
		if len(attempts) > len(s) {
			t.Fatalf("attempt %d not scripted (hosts %v)", len(attempts), hosts)
		}
		return s[len(attempts)-1](ctx, hosts)
	}
	var out strings.Builder
	o.Out = &out
	o.Name = "j"
	sum, err := Run(context.Background(), o)
	return sum, err, attempts, restarts
}

func ok([]string) error { return nil }

func lost(host string) func([]string) error {
	return func([]string) error {
		return launch.NewHostLost("j", host, "connection lost: nothing heard from the host for 5s", time.Time{})
	}
}

// TestElasticLoop (issue 30): a lost host is left out and the job
// restarts on the others; restarts are counted as torchrun counts them;
// fewer than MIN hosts, or restarts past --max-restarts, stop the job with
// a summary saying so; a script's own bug stops it at once instead of
// burning restarts; a host that fails its check is left out at no cost.
func TestElasticLoop(t *testing.T) {
	four := []string{"n1", "n2", "n3", "n4"}
	healthy := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name         string
		opts         Options
		script       script
		wantHosts    [][]string
		wantRestarts []int
		wantErr      string // "" when the job finishes
		wantSummary  []string
	}{
		{name: "lost host", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 3, Check: healthy},
			script:       script{lost("n2"), ok},
			wantHosts:    [][]string{four, {"n1", "n3", "n4"}},
			wantRestarts: []int{0, 1},
			wantSummary: []string{"j: finished on 3 hosts after 1 restart", "attempt 1 (restart 0): 4 hosts: n1 n2 n3 n4",
				"blamed     : n2 lost: connection lost", "attempt 2 (restart 1): 3 hosts: n1 n3 n4", "dropped    : n2",
				"layout     : DP=3", "started    : 1s after the failure", "ended      : finished"}},
		{name: "max caps the hosts used", opts: Options{Hosts: four, Min: 1, Max: 2, MaxRestarts: 1},
			script:       script{lost("n1"), ok},
			wantHosts:    [][]string{{"n1", "n2"}, {"n2", "n3"}},
			wantRestarts: []int{0, 1}},
		{name: "past max restarts", opts: Options{Hosts: four, Min: 1, Max: 4, MaxRestarts: 1},
			script:       script{lost("n2"), lost("n3")},
			wantHosts:    [][]string{four, {"n1", "n3", "n4"}},
			wantRestarts: []int{0, 1},
			wantErr:      "j STOPPED: 1 restart done, --max-restarts 1"},
		{name: "fewer than MIN", opts: Options{Hosts: four, Min: 3, Max: 4, MaxRestarts: 5},
			script:       script{lost("n2"), lost("n3")},
			wantHosts:    [][]string{four, {"n1", "n3", "n4"}},
			wantRestarts: []int{0, 1},
			wantErr:      "j STOPPED: 2 hosts left, fewer than MIN 3 of --nnodes 3:4"},
		{name: "script bug repeats", opts: Options{Hosts: four, Min: 1, Max: 4, MaxRestarts: 5, Check: healthy},
			script: script{
				func([]string) error { return rankFails("n3", 5, 1, "ValueError: loss is nan") },
				func([]string) error { return rankFails("n2", 3, 1, "ValueError: loss is nan") },
			},
			wantHosts:    [][]string{four, four},
			wantRestarts: []int{0, 1},
			wantErr:      "the script's own bug: rank 3 failed with the same error as in the attempt before (exit 1: ValueError: loss is nan)"},
		{name: "rank 0's own bug", opts: Options{Hosts: four, Min: 1, Max: 4, MaxRestarts: 5, Check: healthy},
			script:       script{func([]string) error { return rankFails("n1", 0, 1, "NameError: name 'x' is not defined") }},
			wantHosts:    [][]string{four},
			wantRestarts: []int{0},
			wantErr:      "the script's own bug: rank 0 exited 1 by itself"},
		{name: "rank failure on a sick host", opts: Options{Hosts: four, Min: 1, Max: 4, MaxRestarts: 5,
			Check: func(_ context.Context, h string) error {
				if h == "n4" {
					return errors.New("launch probe: connection refused")
				}
				return nil
			}},
			script:       script{func([]string) error { return rankFails("n4", 6, 134, "RuntimeError: CUDA error") }, ok},
			wantHosts:    [][]string{four, {"n1", "n2", "n3"}},
			wantRestarts: []int{0, 1},
			wantSummary:  []string{"blamed     : n4 failed its check: launch probe: connection refused"}},
		{name: "transient rank failure restarts on the same hosts", opts: Options{Hosts: four, Min: 1, Max: 4, MaxRestarts: 5, Check: healthy},
			script:       script{func([]string) error { return rankFails("n2", 2, 137, "step 7") }, ok},
			wantHosts:    [][]string{four, four},
			wantRestarts: []int{0, 1}},
		{name: "a host that answers again rejoins at the next restart", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 3, Check: healthy},
			script:       script{lost("n2"), func([]string) error { return rankFails("n3", 4, 137, "killed") }, ok},
			wantHosts:    [][]string{four, {"n1", "n3", "n4"}, four},
			wantRestarts: []int{0, 1, 2},
			wantSummary:  []string{"attempt 3 (restart 2): 4 hosts: n1 n2 n3 n4", "added      : n2 (rejoined)"}},
		{name: "a host still down stays out", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 3,
			Check: func(_ context.Context, h string) error {
				if h == "n2" {
					return errors.New("connect: no answer")
				}
				return nil
			}},
			script:       script{lost("n2"), func([]string) error { return rankFails("n3", 4, 137, "killed") }, ok},
			wantHosts:    [][]string{four, {"n1", "n3", "n4"}, {"n1", "n3", "n4"}},
			wantRestarts: []int{0, 1, 2}},
		{name: "a second host lost during the stop rejoins when it answers again", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 3, Check: healthy},
			script: script{
				func([]string) error {
					jf := launch.NewHostLost("j", "n2", "connection lost: nothing heard from the host for 5s", time.Time{})
					he := &remote.HostErrors{}
					he.Add("n2", fmt.Errorf("not reached: %w", remote.ErrConnLost))
					he.Add("n3", fmt.Errorf("not reached: %w", remote.ErrConnLost))
					jf.StopErr = fmt.Errorf("stop: %w", he)
					return jf
				},
				func([]string) error { return rankFails("n4", 4, 137, "killed") },
				ok},
			wantHosts:    [][]string{four, {"n1", "n4"}, four},
			wantRestarts: []int{0, 1, 2},
			wantSummary:  []string{"blamed     : n2 lost: connection lost", "blamed     : n3 lost: not reached: connection lost", "added      : n2 (rejoined), n3 (rejoined)"}},
		{name: "a host not confirmed stopped stays out", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 3, Check: healthy},
			script: script{
				func([]string) error {
					jf := rankFails("n4", 6, 137, "killed").(*launch.JobFailure)
					he := &remote.HostErrors{}
					he.Add("n3", errors.New("stopping process group 7: processes survived KILL"))
					jf.StopErr = fmt.Errorf("stop: %w", he)
					return jf
				},
				func([]string) error { return rankFails("n1", 1, 143, "terminated") },
				ok},
			wantHosts:    [][]string{four, {"n1", "n2", "n4"}, {"n1", "n2", "n4"}},
			wantRestarts: []int{0, 1, 2},
			wantSummary:  []string{"blamed     : n3 not confirmed stopped: stopping process group 7"}},
		{name: "unreachable at start costs no restart", opts: Options{Hosts: four, Min: 2, Max: 4, MaxRestarts: 0,
			Prepare: func(_ context.Context, hosts []string) (*Prepared, error) {
				for _, h := range hosts {
					if h == "n3" {
						he := &remote.HostErrors{}
						he.Add("root@n3:22", errors.New("dial tcp: i/o timeout"))
						return nil, fmt.Errorf("prepare launch: connect: %w", he)
					}
				}
				return &Prepared{Job: fakeJob(hosts), Layout: "x"}, nil
			}},
			script:       script{ok},
			wantHosts:    [][]string{{"n1", "n2", "n4"}},
			wantRestarts: []int{0},
			wantSummary:  []string{"left out   : n3 failed its check: dial tcp: i/o timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err, hosts, restarts := runScript(t, tc.opts, tc.script)
			if fmt.Sprint(hosts) != fmt.Sprint(tc.wantHosts) || fmt.Sprint(restarts) != fmt.Sprint(tc.wantRestarts) {
				t.Errorf("attempts on %v with restarts %v; want %v, %v", hosts, restarts, tc.wantHosts, tc.wantRestarts)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Run = %v, want the job finished", err)
			case tc.wantErr != "":
				var se *StopError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Run = %v, want a StopError with %q", err, tc.wantErr)
				}
			}
			for _, w := range tc.wantSummary {
				if !strings.Contains(sum.String(), w) {
					t.Errorf("summary lacks %q:\n%s", w, sum)
				}
			}
		})
	}
}

// TestStepWatch reads the step of the frameworks' iteration lines (as
// launch streams them: "host:rank: line", in pieces), passes every byte
// on, and keeps each attempt's first and last step apart.
func TestStepWatch(t *testing.T) {
	var out strings.Builder
	w := NewStepWatch(&out)
	clock := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	w.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	for _, tc := range []struct {
		name        string
		writes      []string
		first, last int
	}{
		{name: "Megatron-LM's training_log", writes: []string{
			"node1:0:  iteration      122/  250000 | consumed samples:        15616 | elapsed time per iteration (ms): 865.2 |\n",
			"node1:0:  iteration      123/  250000 | consumed samples:        15744 |\n"},
			first: 122, last: 123},
		{name: "DeepSpeed's engine, in pieces", writes: []string{
			"node1:0: [2026-11-29 01:02:03,456] [INFO] [logging.py:96:log_dist] [Rank 0] step=2", "0, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]\n",
			"node2:1: [Rank 0] step=10, skipped=0, lr=[0.001]\n"},
			first: 20, last: 20},
		{name: "DeepSpeed's engine start-up reports step 0 before the checkpoint loads: not a step", writes: []string{
			"node1:0: [2026-11-29 05:53:11,120] [INFO] [logging.py:96:log_dist] [Rank 0] step=0, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]\n",
			"node1:0: [Rank 0] step=3, skipped=0, lr=[0.001]\n"},
			first: 3, last: 3},
		{name: "examples/torch_elastic.py", writes: []string{"node3:4: RESUMED from step 4 world 6\nnode3:4: iteration 5/16 world 6\nnode1:0: iteration 6/16 world 6\n"},
			first: 5, last: 6},
		{name: "DeepSpeed's throughput timer counts this process's steps: not a step", writes: []string{
			"node1:0: [timer.py:258:stop] epoch=0/micro_step=40/global_step=40, RunningAvgSamplesPerSec=16.1, CurrSamplesPerSec=16.8\n",
			"pipette-launch: restarting\n"},
			first: -1, last: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out.Reset()
			w.next()
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := out.String(); got != strings.Join(tc.writes, "") {
				t.Errorf("passed on %q", got)
			}
			if s := w.next(); s.First != tc.first || s.Last != tc.last || (s.First >= 0) == s.FirstAt.IsZero() {
				t.Errorf("steps %+v, want first %d, last %d", s, tc.first, tc.last)
			}
		})
	}
}

// TestSummarySaysStepsRedone (issue 30, item 7): the summary gives, for a
// restart, the time from the failure to its first step and how many steps it
// did again, from the job's iteration lines.
func TestSummarySaysStepsRedone(t *testing.T) {
	w := NewStepWatch(io.Discard)
	w.now = func() time.Time { return time.Date(2026, 11, 29, 0, 1, 0, 0, time.UTC) }
	iterations := func(from, to int) {
		for s := from; s <= to; s++ {
			fmt.Fprintf(w, "node1:0: iteration %d/16 world 8\n", s)
		}
	}
	sum, err, _, _ := runScript(t, Options{Hosts: []string{"n1", "n2", "n3"}, Min: 2, Max: 3, MaxRestarts: 2, Steps: w}, script{
		func([]string) error { iterations(1, 7); return lost("n2")(nil) },
		func([]string) error { iterations(5, 16); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first step : 58s after the failure (step 5)",
		"redone     : 3 steps (the attempt before printed step 7 last, this one step 5 first)"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}
