package launcher

import (
	"context"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/templates"
)

// A host whose agent finished without every rank's exit status is a
// failure naming the silent rank, never a success.
func TestSuperviseNeedsEveryRanksExit(t *testing.T) {
	job := templates.Job{Name: "j"}
	h := &hostRun{target: HostTarget{Name: "node1"}, done: true,
		job: templates.HostJob{Name: "node1", Ranks: []templates.RankJob{{Rank: 0, LocalRank: 0}, {Rank: 1, LocalRank: 1}}}}
	opts := LaunchOptions{}.withDefaults()
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
			f := supervise(context.Background(), job, []*hostRun{h}, events, opts, nil)
			if (f != nil) != tc.wantFail {
				t.Fatalf("failure = %v, want failure %v", f, tc.wantFail)
			}
			if f != nil && (f.Host != "node1" || f.Rank != 1 || f.LocalRank != 1) {
				t.Errorf("failure names %s rank %d (local %d), want node1 rank 1 (local 1)", f.Host, f.Rank, f.LocalRank)
			}
		})
	}
}
