package launcher

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/diskcache"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// DefaultMeasureMaxAge is how long a cached measurement is reused.
const DefaultMeasureMaxAge = 24 * time.Hour

// MeasureCache keeps measured matrices on disk, one file per set of hosts
// (names and addresses, in order), so a second `probe --measure` on the same
// hosts reuses a fresh result instead of loading the network again.
type MeasureCache struct {
	Dir string
}

// DefaultMeasureCacheDir is $XDG_CACHE_HOME/pipette-launch (or the OS
// equivalent).
func DefaultMeasureCacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("measure cache: %w (pass --cache-dir)", err)
	}
	return filepath.Join(d, "pipette-launch"), nil
}

// key names hosts (names and addresses, in order) as the cache entry's key.
func (c MeasureCache) key(hosts []MeasureHost) string {
	var b strings.Builder
	for _, m := range hosts {
		fmt.Fprintf(&b, "%s\x00%s\x00", m.Name, m.Addr)
	}
	return b.String()
}

// Load returns the cached matrix for hosts when it is younger than maxAge
// at time now. A missing, unreadable or stale entry is a miss, not an error.
func (c MeasureCache) Load(hosts []MeasureHost, maxAge time.Duration, now time.Time) (*cluster.MeasuredBandwidth, bool) {
	var m cluster.MeasuredBandwidth
	if !diskcache.Dir(c.Dir).Load("measure", c.key(hosts), &m) || len(m.Hosts) != len(hosts) || len(m.GbitPerS) != len(hosts) {
		return nil, false
	}
	for i, h := range hosts {
		if m.Hosts[i] != h.Name {
			return nil, false
		}
	}
	if age := now.Sub(m.MeasuredAt); age < 0 || age > maxAge {
		return nil, false
	}
	return &m, true
}

// Save stores m for hosts, replacing the entry atomically in the private
// cache directory (internal/diskcache).
func (c MeasureCache) Save(hosts []MeasureHost, m *cluster.MeasuredBandwidth) error {
	if err := diskcache.Dir(c.Dir).Save("measure", c.key(hosts), m); err != nil {
		return fmt.Errorf("measure %w", err)
	}
	return nil
}

// SlowLinkFactor: inside a group of identical hosts, a host pair whose
// measured rate (the slower direction) is below 1/SlowLinkFactor of the
// group's fastest pair is a slow link, and hosts joined only by slow links
// go to separate islands. A factor this large keeps measurement noise
// (pairs sharing CPUs, a busy link) from splitting a real island.
const SlowLinkFactor = 4

// splitBySpeed splits a group of identical hosts into islands connected by
// fast measured links. Hosts missing from the matrix stay with the first
// island.
func splitBySpeed(group []*HostProbe, m *cluster.MeasuredBandwidth, nameOf func(*HostProbe) string) [][]*HostProbe {
	idx := map[string]int{}
	for i, h := range m.Hosts {
		idx[h] = i
	}
	rate := func(a, b *HostProbe) (float64, bool) {
		i, ok1 := idx[nameOf(a)]
		j, ok2 := idx[nameOf(b)]
		if !ok1 || !ok2 {
			return 0, false
		}
		return min(m.GbitPerS[i][j], m.GbitPerS[j][i]), true
	}
	best := 0.0
	for i := range group {
		for j := i + 1; j < len(group); j++ {
			if r, ok := rate(group[i], group[j]); ok {
				best = max(best, r)
			}
		}
	}
	parent := make([]int, len(group))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for i := range group {
		if _, measured := idx[nameOf(group[i])]; !measured {
			parent[find(i)] = find(0)
			continue
		}
		for j := i + 1; j < len(group); j++ {
			if r, ok := rate(group[i], group[j]); ok && r*SlowLinkFactor >= best {
				parent[find(j)] = find(i)
			}
		}
	}
	return groupInOrder(group, func(i int, _ *HostProbe) int { return find(i) })
}

// MatrixTable renders a measured matrix as an aligned text table (Gbit/s).
func MatrixTable(m *cluster.MeasuredBandwidth) string {
	var b strings.Builder
	w := 8
	for _, h := range m.Hosts {
		w = max(w, len(h)+1)
	}
	fmt.Fprintf(&b, "%-*s", w, "Gbit/s")
	for _, h := range m.Hosts {
		fmt.Fprintf(&b, "%*s", w, h)
	}
	b.WriteString("\n")
	for i, h := range m.Hosts {
		fmt.Fprintf(&b, "%-*s", w, h)
		for j := range m.Hosts {
			if i == j {
				fmt.Fprintf(&b, "%*s", w, "-")
				continue
			}
			fmt.Fprintf(&b, "%*.3f", w, m.GbitPerS[i][j])
		}
		b.WriteString("\n")
	}
	return b.String()
}
