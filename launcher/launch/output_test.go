package launch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

func twoHostJob() job.Job {
	j := job.Job{Name: "j"}
	for n, h := range []string{"a", "b"} {
		hj := job.HostJob{Name: h}
		for l := 0; l < 2; l++ {
			hj.Ranks = append(hj.Ranks, job.RankJob{Rank: n*2 + l, LocalRank: l, Argv: []string{"x"}})
		}
		j.Hosts = append(j.Hosts, hj)
	}
	return j
}

func TestOutputFiltersAndLogs(t *testing.T) {
	cases := []struct {
		name   string
		filter []int
		quiet  []int
		want   string
	}{
		{"all", nil, nil, "a:0: l0\na:1: l1\nb:2: l2\nb:3: l3\n"},
		{"local rank 0 only", []int{0}, nil, "a:0: l0\nb:2: l2\n"},
		{"quiet rank 3", nil, []int{3}, "a:0: l0\na:1: l1\nb:2: l2\n"},
		{"both", []int{1}, []int{1}, "b:3: l3\n"},
	}
	for _, c := range cases {
		var sb strings.Builder
		dir := t.TempDir()
		o := newOutput(twoHostJob(), Options{Out: &sb, LogDir: dir, LocalRanksFilter: c.filter, QuietRanks: c.quiet}.withDefaults())
		if err := o.openLogs(); err != nil {
			t.Fatal(err)
		}
		for _, k := range []rankKey{{"a", 0}, {"a", 1}, {"b", 2}, {"b", 3}} {
			o.rankLine(k.host, k.rank, "l"+string(rune('0'+k.rank)))
		}
		o.close()
		if sb.String() != c.want {
			t.Errorf("%s: console =\n%s\nwant\n%s", c.name, sb.String(), c.want)
		}
		// Hidden ranks still get their log file and summary tail.
		b, err := os.ReadFile(filepath.Join(dir, "b.3.log"))
		if err != nil || string(b) != "l3\n" {
			t.Errorf("%s: b.3.log = %q, %v", c.name, b, err)
		}
		if got := o.tail("b", 3); len(got) != 1 || got[0] != "l3" {
			t.Errorf("%s: tail = %q", c.name, got)
		}
	}
}

// TestLogsKeptAcrossAttempts: a later attempt of the same job that spends
// no restart (launcher/elastic's grow-back: Attempt above Restart) appends
// to the --log-dir files, with a line naming it, as a restart does.
func TestLogsKeptAcrossAttempts(t *testing.T) {
	dir := t.TempDir()
	for i, o := range []Options{{}, {Attempt: 1}, {Attempt: 2, Restart: 1}} {
		o.Out, o.LogDir, o.NoRestarts = &strings.Builder{}, dir, true
		err := runAttempts(context.Background(), twoHostJob(), o.withDefaults(), func(out *output, _ int) error {
			out.rankLine("a", 0, fmt.Sprintf("attempt %d", i+1))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "a.0.log"))
	want := "attempt 1\n=== pipette-launch: attempt 2 (restart 0) ===\nattempt 2\n=== pipette-launch: attempt 3 (restart 1) ===\nattempt 3\n"
	if err != nil || string(b) != want {
		t.Errorf("a.0.log = %q, %v; want %q", b, err, want)
	}
}

// TestStartedAtEachAttempt: Options.Started is called as each attempt
// begins, launch's own restarts included (a progress watch re-arms there).
func TestStartedAtEachAttempt(t *testing.T) {
	var started []int
	o := Options{Out: &strings.Builder{}, MaxRestarts: 2, Restart: 1, Started: func(n int) { started = append(started, n) }}
	calls := 0
	err := runAttempts(context.Background(), twoHostJob(), o.withDefaults(), func(*output, int) error {
		if calls++; calls == 1 {
			return &JobFailure{Job: "j", Host: "a", Rank: 1, ExitCode: 137, Reason: "killed"}
		}
		return nil
	})
	if err != nil || fmt.Sprint(started) != "[1 2]" {
		t.Errorf("runAttempts = %v, Started with %v; want nil and [1 2]", err, started)
	}
}
