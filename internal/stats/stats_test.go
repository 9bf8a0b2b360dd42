package stats

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []float64
		want float64
	}{
		{"empty", nil, 0},
		{"one", []float64{3}, 3},
		{"odd, unsorted", []float64{5, 1, 3}, 3},
		// The upper median (4) would be wrong here: the true median of an
		// even count is the mean of the two middle values.
		{"even", []float64{4, 1, 2, 100}, 3},
		{"even, two", []float64{0.002, 0.001}, 0.0015},
	} {
		in := append([]float64(nil), c.in...)
		if got := Median(c.in); got != c.want {
			t.Errorf("%s: Median(%v) = %v, want %v", c.name, c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("%s: Median reordered its input to %v", c.name, c.in)
			}
		}
	}
	if got := Median([]time.Duration{4 * time.Second, 1 * time.Second, 2 * time.Second, 3 * time.Second}); got != 2500*time.Millisecond {
		t.Errorf("Median of durations = %v, want 2.5s", got)
	}
}
