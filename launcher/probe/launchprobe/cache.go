package launchprobe

import (
	"fmt"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/diskcache"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// DefaultMaxAge is how long a cached launch probe is shown by
// --dry-run and --output-dir (a launch always probes again).
const DefaultMaxAge = 24 * time.Hour

// Cache keeps the launch probe's answers on disk next to the
// measurement cache, one file per job shape: the hosts as SSH reaches them
// (name, address, user, port, in order), which of them runs rank 0 and the
// interpreter path checked. A real launch writes it; --dry-run and
// --output-dir read it, so they show the address and interfaces the launch
// would use.
type Cache struct {
	Dir string
}

// key names the job shape as the cache entry's key.
func (c Cache) key(targets []remote.HostTarget, rank0 int, python string) string {
	var b strings.Builder
	for _, t := range targets {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%d\x00", t.Name, t.Addr, t.User, t.Port)
	}
	fmt.Fprintf(&b, "rank0 %d\x00python %s", rank0, python)
	return b.String()
}

// Load returns the cached probe for this job shape when it is younger than
// maxAge at now. A missing, unreadable, mismatched or stale entry is a
// miss, not an error.
func (c Cache) Load(targets []remote.HostTarget, rank0 int, python string, maxAge time.Duration, now time.Time) (*Result, bool) {
	var lp Result
	if !diskcache.Dir(c.Dir).Load("launch", c.key(targets, rank0, python), &lp) || len(lp.Hosts) != len(targets) || lp.MasterAddr == "" {
		return nil, false
	}
	for i, t := range targets {
		if lp.Hosts[i].Target != t.String() || lp.Hosts[i].Python != python {
			return nil, false
		}
	}
	if age := now.Sub(lp.ProbedAt); age < 0 || age > maxAge {
		return nil, false
	}
	return &lp, true
}

// Save stores lp (stamped ProbedAt) for this job shape, replacing the entry
// atomically in the private cache directory (internal/diskcache).
func (c Cache) Save(targets []remote.HostTarget, rank0 int, python string, lp *Result) error {
	if err := diskcache.Dir(c.Dir).Save("launch", c.key(targets, rank0, python), lp); err != nil {
		return fmt.Errorf("launch probe %w", err)
	}
	return nil
}
