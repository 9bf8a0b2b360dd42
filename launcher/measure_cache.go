package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/planner"
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

func (c MeasureCache) path(hosts []MeasureHost) string {
	h := sha256.New()
	for _, m := range hosts {
		fmt.Fprintf(h, "%s\x00%s\x00", m.Name, m.Addr)
	}
	return filepath.Join(c.Dir, "measure-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")
}

// Load returns the cached matrix for hosts when it is younger than maxAge
// at time now. A missing, unreadable or stale entry is a miss, not an error.
func (c MeasureCache) Load(hosts []MeasureHost, maxAge time.Duration, now time.Time) (*planner.MeasuredBandwidth, bool) {
	b, err := os.ReadFile(c.path(hosts))
	if err != nil {
		return nil, false
	}
	var m planner.MeasuredBandwidth
	if err := json.Unmarshal(b, &m); err != nil || len(m.Hosts) != len(hosts) || len(m.GbitPerS) != len(hosts) {
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

// Save stores m for hosts, replacing the file atomically.
func (c MeasureCache) Save(hosts []MeasureHost, m *planner.MeasuredBandwidth) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("measure cache: %w", err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("measure cache: %w", err)
	}
	p := c.path(hosts)
	tmp, err := os.CreateTemp(c.Dir, ".measure-*")
	if err != nil {
		return fmt.Errorf("measure cache: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("measure cache %s: %w", p, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("measure cache %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("measure cache %s: %w", p, err)
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
func splitBySpeed(group []*HostProbe, m *planner.MeasuredBandwidth, nameOf func(*HostProbe) string) [][]*HostProbe {
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
func MatrixTable(m *planner.MeasuredBandwidth) string {
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
