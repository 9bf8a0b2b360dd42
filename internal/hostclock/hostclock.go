// Package hostclock converts a host's clock to ours.
//
// Hosts stamp each rank's exit with their own clock, which may differ from
// ours (and from each other's) by seconds; the summary compares exits on
// different hosts, so each host's offset is measured when its agent
// connects: the agent's first line carries its clock. That stamp was taken
// after we started the agent and before its line reached us, which bounds
// the offset; on a busy host the interval is seconds wide (the login
// shell's start-up, scheduling, the SSH channel), so taking the stamp as
// "now" when it arrives would shift each host's exits by its own delay and
// reorder failures that happened a moment apart. The offset used is the
// smallest correction the bounds allow: none when the clocks agree within
// what we can measure (NTP-synced hosts, or one machine), else the nearest
// bound.
package hostclock

import (
	"fmt"
	"strconv"
	"time"
)

// Offset is a host's clock minus ours.
type Offset struct {
	Offset time.Duration
	Known  bool
	// Lo and Hi bound the true offset when Bounded (see Between).
	Lo, Hi  time.Duration
	Bounded bool
}

// ToLocal converts a host timestamp to our clock.
func (c Offset) ToLocal(t time.Time) time.Time { return t.Add(-c.Offset) }

// Uncertainty is how far the true offset may be from Offset: the width of
// the bounds (0 when unbounded: nothing is known about it).
func (c Offset) Uncertainty() time.Duration {
	if !c.Bounded {
		return 0
	}
	return max(c.Offset-c.Lo, c.Hi-c.Offset)
}

// From is the offset of a host whose clock read host when we
// received it at now, with nothing known about when it was read.
func From(host, now time.Time) Offset {
	return Offset{Offset: host.Sub(now), Known: true}
}

// Between is the offset of a host whose clock read host at some
// moment after we sent (by our clock) and before we received it: the true
// offset lies in [host-received, host-sent]. It picks the value in there
// closest to 0.
func Between(host, sent, received time.Time) Offset {
	lo, hi := host.Sub(received), host.Sub(sent)
	if hi < lo { // our clock stepped back between the two readings
		lo, hi = hi, lo
	}
	return Offset{Offset: min(max(0, lo), hi), Known: true, Lo: lo, Hi: hi, Bounded: true}
}

// parseNanos reads `date +%s%N` (seconds and nanoseconds since the epoch).
func ParseNanos(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1e18 {
		// busybox date prints %N literally: not a time we can use.
		return time.Time{}, fmt.Errorf("not nanoseconds since the epoch: %q", s)
	}
	return time.Unix(0, n), nil
}
