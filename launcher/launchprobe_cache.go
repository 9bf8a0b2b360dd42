package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DefaultLaunchProbeMaxAge is how long a cached launch probe is shown by
// --dry-run and --output-dir (a launch always probes again).
const DefaultLaunchProbeMaxAge = 24 * time.Hour

// LaunchProbeCache keeps the launch probe's answers on disk next to the
// measurement cache, one file per job shape: the hosts as SSH reaches them
// (name, address, user, port, in order), which of them runs rank 0 and the
// interpreter path checked. A real launch writes it; --dry-run and
// --output-dir read it, so they show the address and interfaces the launch
// would use.
type LaunchProbeCache struct {
	Dir string
}

func (c LaunchProbeCache) path(targets []HostTarget, rank0 int, python string) string {
	h := sha256.New()
	for _, t := range targets {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00", t.Name, t.Addr, t.User, t.Port)
	}
	fmt.Fprintf(h, "rank0 %d\x00python %s", rank0, python)
	return filepath.Join(c.Dir, "launch-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")
}

// Load returns the cached probe for this job shape when it is younger than
// maxAge at now. A missing, unreadable, mismatched or stale entry is a
// miss, not an error.
func (c LaunchProbeCache) Load(targets []HostTarget, rank0 int, python string, maxAge time.Duration, now time.Time) (*LaunchProbe, bool) {
	b, err := os.ReadFile(c.path(targets, rank0, python))
	if err != nil {
		return nil, false
	}
	var lp LaunchProbe
	if err := json.Unmarshal(b, &lp); err != nil || len(lp.Hosts) != len(targets) || lp.MasterAddr == "" {
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

// Save stores lp (stamped ProbedAt) for this job shape, replacing the file
// atomically; the directory is the user's own (0700).
func (c LaunchProbeCache) Save(targets []HostTarget, rank0 int, python string, lp *LaunchProbe) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("launch probe cache: %w", err)
	}
	b, err := json.MarshalIndent(lp, "", "  ")
	if err != nil {
		return fmt.Errorf("launch probe cache: %w", err)
	}
	p := c.path(targets, rank0, python)
	tmp, err := os.CreateTemp(c.Dir, ".launch-*")
	if err != nil {
		return fmt.Errorf("launch probe cache: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("launch probe cache %s: %w", p, err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("launch probe cache %s: %w", p, err)
	}
	return nil
}
