package launcher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Hosts stamp each rank's exit with their own clock, which may differ from
// ours (and from each other's) by seconds; the summary compares exits on
// different hosts, so each host's offset is measured once at connect, as
// NTP does: the host's time against the midpoint of our send and receive,
// best of a few samples (the one with the shortest round trip is the
// tightest bound).

// clockOffset is a host's clock minus ours, within ±Err.
type clockOffset struct {
	Offset time.Duration
	Err    time.Duration // half the round trip of the sample used
	Known  bool
}

// toLocal converts a host timestamp to our clock.
func (c clockOffset) toLocal(t time.Time) time.Time { return t.Add(-c.Offset) }

const clockSamples = 3

// measureClock samples the host's clock over c.
func measureClock(ctx context.Context, c *Conn, now func() time.Time) (clockOffset, error) {
	best := clockOffset{}
	for range clockSamples {
		t0 := now()
		out, _, err := c.Run(ctx, "date +%s%N")
		t1 := now()
		if err != nil {
			return best, err
		}
		host, err := parseNanos(strings.TrimSpace(string(out)))
		if err != nil {
			return best, fmt.Errorf("read clock: %w", err)
		}
		rtt := t1.Sub(t0)
		mid := t0.Add(rtt / 2)
		if !best.Known || rtt/2 < best.Err {
			best = clockOffset{Offset: host.Sub(mid), Err: rtt / 2, Known: true}
		}
	}
	return best, nil
}

// measureClocks measures every target's clock offset; a host whose clock
// cannot be read keeps a zero, unknown offset (its times are then taken as
// ours), which is noted once.
func measureClocks(ctx context.Context, pool *Pool, targets []HostTarget, opts LaunchOptions, out *output) map[string]clockOffset {
	res := map[string]clockOffset{}
	var mu sync.Mutex
	_ = pool.Each(ctx, targets, func(ctx context.Context, t HostTarget) error {
		c := pool.Conn(t)
		if c == nil {
			return nil
		}
		off, err := measureClock(ctx, c, opts.Now)
		if err != nil {
			out.note("pipette-launch: %s: cannot read its clock (%v); its exit times are compared as if its clock were ours", t.Name, err)
		}
		mu.Lock()
		res[t.Name] = off
		mu.Unlock()
		return nil
	})
	return res
}

// parseNanos reads `date +%s%N` (seconds and nanoseconds since the epoch).
func parseNanos(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1e18 {
		// busybox date prints %N literally: not a time we can use.
		return time.Time{}, fmt.Errorf("not nanoseconds since the epoch: %q", s)
	}
	return time.Unix(0, n), nil
}
