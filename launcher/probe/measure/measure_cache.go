package measure

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

// Cache keeps measured matrices on disk, one file per set of hosts
// (names and addresses, in order), so a second `probe --measure` on the same
// hosts reuses a fresh result instead of loading the network again.
type Cache struct {
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
func (c Cache) key(hosts []Host) string {
	var b strings.Builder
	for _, m := range hosts {
		fmt.Fprintf(&b, "%s\x00%s\x00", m.Name, m.Addr)
	}
	return b.String()
}

// Load returns the cached matrix for hosts when it is younger than maxAge
// at time now. A missing, unreadable or stale entry is a miss, not an error.
func (c Cache) Load(hosts []Host, maxAge time.Duration, now time.Time) (*cluster.MeasuredBandwidth, bool) {
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
func (c Cache) Save(hosts []Host, m *cluster.MeasuredBandwidth) error {
	if err := diskcache.Dir(c.Dir).Save("measure", c.key(hosts), m); err != nil {
		return fmt.Errorf("measure %w", err)
	}
	return nil
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
