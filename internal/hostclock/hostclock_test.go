package hostclock

import (
	"testing"
	"time"
)

// The offset is bounded by when we started the agent and when its clock
// line arrived; within those bounds the smallest correction is taken, so a
// line that arrives late on a busy host does not shift its host's exit
// stamps by the delay.
func TestOffsetBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC)
	s := time.Second
	for _, tc := range []struct {
		name             string
		skew             time.Duration // the host's clock minus ours
		stampAt, arrives time.Duration // after we started the agent, by our clock
		want             time.Duration
	}{
		{"same clock, line 3 s late", 0, 200 * time.Millisecond, 3200 * time.Millisecond, 0},
		{"same clock, prompt line", 0, 200 * time.Millisecond, 210 * time.Millisecond, 0},
		{"host 5 s ahead", 5 * s, 200 * time.Millisecond, time.Second, 4200 * time.Millisecond},
		{"host 3 s behind", -3 * s, 200 * time.Millisecond, time.Second, -2800 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := t0.Add(tc.stampAt + tc.skew)
			c := Between(host, t0, t0.Add(tc.arrives))
			if c.Offset != tc.want || !c.Known || !c.Bounded {
				t.Errorf("offset = %+v, want %s", c, tc.want)
			}
			// The truth lies within the bounds, and within Uncertainty of
			// the offset used.
			if tc.skew < c.Lo || tc.skew > c.Hi {
				t.Errorf("bounds [%s, %s] exclude the true offset %s", c.Lo, c.Hi, tc.skew)
			}
			if d := (tc.skew - c.Offset).Abs(); d > c.Uncertainty() {
				t.Errorf("true offset %s is %s from %s, beyond the uncertainty %s", tc.skew, d, c.Offset, c.Uncertainty())
			}
		})
	}
}
