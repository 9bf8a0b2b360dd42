package schedule

import (
	"math"
	"testing"
)

func uniformPipeline(p, v, m int, tf, tb, link float64) Times {
	pt := Times{MicroBatches: m, Link: make([]float64, p)}
	for r := 0; r < p; r++ {
		f := make([]float64, v)
		b := make([]float64, v)
		for c := range f {
			f[c], b[c] = tf/float64(v), tb/float64(v)
		}
		pt.Fwd = append(pt.Fwd, f)
		pt.Bwd = append(pt.Bwd, b)
		pt.Link[r] = link
	}
	return pt
}

func approx(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// 1F1B with equal stages and free links takes (p-1+m)(tf+tb) (Narayanan et
// al. 2021, section 2.2.1).
func TestSchedule1F1BClosedForm(t *testing.T) {
	for _, tc := range []struct{ p, m int }{{1, 1}, {1, 8}, {2, 2}, {4, 4}, {4, 16}, {8, 64}, {16, 128}, {4, 3}} {
		tf, tb := 1.0, 2.0
		res, err := Simulate(uniformPipeline(tc.p, 1, tc.m, tf, tb, 0))
		if err != nil {
			t.Fatal(err)
		}
		want := float64(tc.p-1+tc.m) * (tf + tb)
		if !approx(res.Makespan, want, 1e-9) {
			t.Errorf("p=%d m=%d: makespan %g, want %g", tc.p, tc.m, res.Makespan, want)
		}
		wantBubble := float64(tc.p-1) / float64(tc.p-1+tc.m)
		if !approx(res.BubbleFraction, wantBubble, 1e-9) && !(wantBubble == 0 && res.BubbleFraction < 1e-12) {
			t.Errorf("p=%d m=%d: bubble %g, want %g", tc.p, tc.m, res.BubbleFraction, wantBubble)
		}
	}
}

// Interleaving with v chunks cuts the bubble to (p-1)/(v*m) of the ideal
// time (Narayanan et al. 2021, section 2.2.2).
func TestScheduleInterleavedClosedForm(t *testing.T) {
	for _, tc := range []struct{ p, v, m int }{{2, 2, 4}, {4, 2, 8}, {4, 4, 16}, {8, 3, 16}, {4, 2, 4}} {
		tf, tb := 1.0, 2.0
		res, err := Simulate(uniformPipeline(tc.p, tc.v, tc.m, tf, tb, 0))
		if err != nil {
			t.Fatal(err)
		}
		ideal := float64(tc.m) * (tf + tb)
		ratio := (res.Makespan - ideal) / ideal
		want := float64(tc.p-1) / float64(tc.v*tc.m)
		if !approx(ratio, want, 1e-9) {
			t.Errorf("p=%d v=%d m=%d: bubble/ideal %g, want %g", tc.p, tc.v, tc.m, ratio, want)
		}
	}
}

func TestScheduleSlowStageDominates(t *testing.T) {
	p, m := 4, 32
	pt := uniformPipeline(p, 1, m, 1, 2, 0)
	pt.Fwd[2][0], pt.Bwd[2][0] = 2, 4 // stage 2 twice as slow
	res, err := Simulate(pt)
	if err != nil {
		t.Fatal(err)
	}
	// The slow stage sets the steady-state period: at least m*(its F+B).
	if res.Makespan < float64(m)*6 {
		t.Fatalf("makespan %g below slow stage's busy time %g", res.Makespan, float64(m)*6)
	}
	// By hand: stage 2 starts at 2 (two upstream forwards), waits 1 s once
	// for stage 3's first backward, then runs m*(2+4) back to back, and the
	// last backward still crosses stages 1 and 0 (2 s each).
	want := 2 + 1 + float64(m)*6 + 4
	if !approx(res.Makespan, want, 1e-9) {
		t.Fatalf("makespan %g, want %g", res.Makespan, want)
	}
}

func TestScheduleSlowLinkShowsUp(t *testing.T) {
	p, m := 4, 16
	base, _ := Simulate(uniformPipeline(p, 1, m, 1, 2, 0.01))
	pt := uniformPipeline(p, 1, m, 1, 2, 0.01)
	pt.Link[1] = 0.5
	slow, _ := Simulate(pt)
	// Fill and drain cross the slow boundary once each way at least.
	if slow.Makespan < base.Makespan+2*(0.5-0.01)-1e-9 {
		t.Fatalf("slow link: makespan %g vs %g", slow.Makespan, base.Makespan)
	}
	// A link slower than a stage's work throttles the steady state too.
	pt.Link[1] = 5
	slower, _ := Simulate(pt)
	if slower.Makespan < float64(m)*5 {
		t.Fatalf("link of 5 s per message over %d micro-batches: makespan %g", m, slower.Makespan)
	}
}

func TestScheduleMoreMicroBatchesLowerBubble(t *testing.T) {
	for _, v := range []int{1, 2} {
		prev := 1.0
		for _, m := range []int{4, 8, 16, 32, 64} {
			pt := uniformPipeline(4, v, m, 1.3, 2.1, 0.05)
			pt.Fwd[3][0] *= 1.4
			res, err := Simulate(pt)
			if err != nil {
				t.Fatal(err)
			}
			if res.BubbleFraction >= prev {
				t.Errorf("v=%d m=%d: bubble %g did not fall below %g", v, m, res.BubbleFraction, prev)
			}
			prev = res.BubbleFraction
		}
	}
}

func TestScheduleFinishOrder(t *testing.T) {
	res, _ := Simulate(uniformPipeline(4, 1, 8, 1, 2, 0))
	for r := 1; r < 4; r++ {
		if res.Finish[r] >= res.Finish[r-1] {
			t.Fatalf("rank %d finishes at %g, not before rank %d (%g)", r, res.Finish[r], r-1, res.Finish[r-1])
		}
	}
	if _, err := Simulate(uniformPipeline(4, 2, 6, 1, 2, 0)); err == nil {
		t.Fatal("interleaved with m % p != 0 accepted")
	}
}
