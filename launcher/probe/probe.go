package probe

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// HostProbe is what one host reported.
type HostProbe struct {
	// Target is the host as the user named it (hostlist entry); Hostname is
	// what the host calls itself.
	Target   string `json:"target"`
	Hostname string `json:"hostname"`
	// Addr is the IPv4 address other hosts reach this one on.
	Addr        string `json:"addr"`
	GPUs        []GPU  `json:"gpus,omitempty"`
	NICs        []NIC  `json:"nics,omitempty"`
	MemoryBytes int64  `json:"memory_bytes"`
	CPUCores    int    `json:"cpu_cores"`
	// Software is what the probe read from the host's Python packages.
	Software cluster.SoftwareVersions `json:"software"`
	Topology *Topology                `json:"-"`
	// Warnings are things that did not stop the probe (nvidia-smi failing).
	Warnings []string `json:"warnings,omitempty"`
}

// ProbeHost runs the probe command on one host and parses its output.
// target names the host in the result.
func ProbeHost(ctx context.Context, target string, r remote.Runner) (*HostProbe, error) {
	stdout, stderr, err := r.Run(ctx, ProbeCommand())
	if err != nil {
		return nil, fmt.Errorf("probe: %w%s", err, remote.StderrSuffix(stderr))
	}
	hp, err := ParseProbeOutput(string(stdout))
	if err != nil {
		return nil, fmt.Errorf("probe: %w%s", err, remote.StderrSuffix(stderr))
	}
	hp.Target = target
	return hp, nil
}

// Hosts connects to every target through pool (at most pool.Fanout at
// once) and probes it. Results keep the targets' order, each HostProbe's
// Target being the target's Name; hosts that failed are nil and named in
// the returned *HostErrors.
func Hosts(ctx context.Context, pool *remote.Pool, targets []remote.HostTarget, progress *progress.Line) ([]*HostProbe, error) {
	errs := &remote.HostErrors{}
	addHostErrors := func(err error) error {
		var he *remote.HostErrors
		if err != nil && !errors.As(err, &he) {
			return err
		}
		if he != nil {
			errs.Errs = append(errs.Errs, he.Errs...)
		}
		return nil
	}
	progress.Update("probe: connecting to %d hosts", len(targets))
	if err := addHostErrors(pool.DialAll(ctx, targets)); err != nil {
		return nil, err
	}
	results := make([]*HostProbe, len(targets))
	index := map[remote.HostTarget]int{}
	for i, t := range targets {
		index[t] = i
	}
	var mu sync.Mutex
	done := 0
	err := pool.Each(ctx, targets, func(ctx context.Context, t remote.HostTarget) error {
		c := pool.Conn(t)
		if c == nil {
			return nil // its dial error is already recorded
		}
		hp, err := ProbeHost(ctx, t.Name, c)
		mu.Lock()
		defer mu.Unlock()
		results[index[t]] = hp
		done++
		progress.Update("probe: %d/%d hosts", done, len(targets))
		return err
	})
	progress.Done()
	if err := addHostErrors(err); err != nil {
		return nil, err
	}
	return results, errs.ErrorOrNil()
}

// HostEntries returns the cluster-file entry (name, user, port) of each
// target, keyed by Name, for ClusterOptions.Entries.
func HostEntries(targets []remote.HostTarget) map[string]cluster.HostEntry {
	m := map[string]cluster.HostEntry{}
	for _, t := range targets {
		m[t.Name] = cluster.HostEntry{Name: t.Name, User: t.User, Port: t.Port}
	}
	return m
}
