package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// --launcher values: how pipette-launch reaches and starts processes on the
// hosts.
const (
	launcherAuto  = "auto"
	launcherSSH   = "ssh"
	launcherSlurm = "slurm"
)

// chooseLauncher resolves --launcher: auto is slurm inside an allocation
// (SLURM_JOB_ID set), ssh otherwise.
func chooseLauncher(flag string, getenv func(string) string) (string, error) {
	switch flag {
	case "", launcherAuto:
		if strings.TrimSpace(getenv("SLURM_JOB_ID")) != "" {
			return launcherSlurm, nil
		}
		return launcherSSH, nil
	case launcherSSH, launcherSlurm:
		return flag, nil
	}
	return "", fmt.Errorf("--launcher %q: want auto, ssh or slurm", flag)
}

func (o *ProbeOptions) getenv() func(string) string {
	if o.Getenv != nil {
		return o.Getenv
	}
	return os.Getenv
}

// hostReach is how probe reaches its hosts: an SSH pool, or srun steps in
// the Slurm allocation.
type hostReach struct {
	targets []remote.HostTarget
	pool    *remote.Pool
	slurm   *remote.Slurm
}

func newHostReach(opts *ProbeOptions) (*hostReach, error) {
	getenv := opts.getenv()
	which, err := chooseLauncher(opts.Launcher, getenv)
	if err != nil {
		return nil, probeInputError{err}
	}
	if which == launcherSSH {
		specs, err := remote.ResolveHosts(remote.HostSources{Hosts: opts.Hosts, Hostfile: opts.Hostfile, Getenv: opts.Getenv})
		if err != nil {
			return nil, probeInputError{fmt.Errorf("probe: %w", err)}
		}
		return &hostReach{targets: remote.Targets(specs), pool: remote.NewPool(opts.SSH, opts.Fanout)}, nil
	}
	s, nodes, err := remote.SlurmFromEnv(getenv)
	if err != nil {
		return nil, probeInputError{fmt.Errorf("probe --launcher slurm: %w", err)}
	}
	names, err := slurmNodesChosen(nodes, opts.Hosts, opts.Hostfile)
	if err != nil {
		return nil, probeInputError{fmt.Errorf("probe --launcher slurm: %w", err)}
	}
	targets := make([]remote.HostTarget, len(names))
	for i, n := range names {
		targets[i] = remote.HostTarget{Name: n}
	}
	return &hostReach{targets: targets, slurm: &s}, nil
}

// slurmNodesChosen is the allocation's nodes, narrowed and ordered by
// --hosts/--hostfile when given; a host outside the allocation is an error.
func slurmNodesChosen(nodes []string, hosts, hostfile string) ([]string, error) {
	if hosts == "" && hostfile == "" {
		return nodes, nil
	}
	specs, err := remote.ResolveHosts(remote.HostSources{Hosts: hosts, Hostfile: hostfile, Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, sp := range specs {
		if !slices.Contains(nodes, sp.Name) {
			return nil, fmt.Errorf("host %s is not in the allocation (SLURM_JOB_NODELIST: %s): name only allocated nodes", sp.Name, strings.Join(nodes, ","))
		}
		out = append(out, sp.Name)
	}
	return out, nil
}

func (r *hostReach) probe(ctx context.Context, progress *progress.Line) ([]*probe.HostProbe, error) {
	if r.slurm != nil {
		names := make([]string, len(r.targets))
		for i, t := range r.targets {
			names[i] = t.Name
		}
		return probe.ProbeHostsSlurm(ctx, *r.slurm, names, progress)
	}
	return probe.ProbeHosts(ctx, r.pool, r.targets, progress)
}

// runner runs one-off commands on a host (the bandwidth measurement).
func (r *hostReach) runner(t remote.HostTarget) remote.Runner {
	if r.slurm != nil {
		return r.slurm.Runner(t.Name)
	}
	return r.pool.Conn(t)
}

func (r *hostReach) close() {
	if r.pool != nil {
		r.pool.Close()
	}
}

// slurmFor returns the allocation a run starts in when --launcher picks
// Slurm (nil for SSH). Every host of the job must be one of its nodes.
func slurmFor(o *RunOptions, job *job.Job) (*remote.Slurm, error) {
	getenv := envLookup(o.Env)
	which, err := chooseLauncher(o.Launcher, getenv)
	if err != nil || which != launcherSlurm {
		return nil, inputErrorOrNil(err)
	}
	s, nodes, err := remote.SlurmFromEnv(getenv)
	if err != nil {
		return nil, inputErrorf("--launcher slurm: %v", err)
	}
	for _, h := range job.Hosts {
		if !slices.Contains(nodes, h.Name) {
			return nil, inputErrorf("--launcher slurm: host %s is not a node of Slurm job %s (SLURM_JOB_NODELIST: %s): plan on the allocation's nodes, or use --launcher ssh", h.Name, s.JobID, strings.Join(nodes, ","))
		}
	}
	s.Env = o.Env
	return &s, nil
}

func inputErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return &inputError{err.Error()}
}
