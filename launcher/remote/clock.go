package remote

import (
	"fmt"
	"strconv"
	"time"
)

// Hosts stamp each rank's exit with their own clock, which may differ from
// ours (and from each other's) by seconds; the summary compares exits on
// different hosts, so each host's offset is measured when its agent
// connects: the agent's first line carries its clock, read by us as it
// arrives. A round trip through a separate command would be worse: the
// login shell's start-up (slow on a busy host) sits between our send and
// the host's reading, at an unknown point, while the agent's line reaches
// us within the network's one-way delay.

// clockOffset is a host's clock minus ours.
type ClockOffset struct {
	Offset time.Duration
	Known  bool
}

// toLocal converts a host timestamp to our clock.
func (c ClockOffset) ToLocal(t time.Time) time.Time { return t.Add(-c.Offset) }

// offsetFrom is the offset of a host whose clock read host when we
// received it at now.
func OffsetFrom(host, now time.Time) ClockOffset {
	return ClockOffset{Offset: host.Sub(now), Known: true}
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
