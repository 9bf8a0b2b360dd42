package main

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner"
)

// The scalable search finds plans as fast as the planner before it. The
// reference times are what commit 9928d2f (the last before this
// benchmark) predicts for its best plan, run as
//
//	pipette-launch plan --cluster KIND-HOSTS.yaml --model llama2-70b --top 1 \
//	    --global-batch-size 2048 --placement-budget 0 --json
//
// on files from `go run ./bench/scale -kind KIND -hosts HOSTS` (no time
// budget, so the old search ran to its evaluation caps and is
// deterministic). Each search here also has no time budget.
func TestPlansAsGoodAsBefore(t *testing.T) {
	m, err := planner.Preset("llama2-70b")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		kind   string
		hosts  int
		before float64 // seconds per iteration
	}{
		{"three-islands", 128, 13.966309551756721},
		{"three-islands", 512, 5.5057439994697095},
		{"measured-matrix", 128, 14.940111928978883},
		{"homogeneous", 128, 7.029021172563079},
		{"homogeneous", 512, 1.9485727787942242},
	}
	for _, tc := range cases {
		f, err := Generate(tc.kind, tc.hosts)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		res, err := planner.Search(c, m, planner.SearchOptions{Framework: planner.FrameworkMegatron, GlobalBatch: 2048, TopK: 1, Seed: 1})
		if err != nil {
			t.Fatalf("%s %d: %v", tc.kind, tc.hosts, err)
		}
		got := res.Plans[0].Predicted.IterationSeconds
		if got > tc.before*(1+1e-9) {
			t.Errorf("%s %d hosts: best plan %.4f s/iteration, the planner before found %.4f s", tc.kind, tc.hosts, got, tc.before)
		}
		t.Logf("%s %d hosts: %.4f s (before %.4f s)", tc.kind, tc.hosts, got, tc.before)
	}
}
