package probe

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

func (o *Options) getenv() func(string) string {
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

func newHostReach(opts *Options) (*hostReach, error) {
	getenv := opts.getenv()
	which, err := cmdutil.ChooseLauncher(opts.Launcher, getenv)
	if err != nil {
		return nil, probeInputError{err}
	}
	if which == cmdutil.LauncherSSH {
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
		return probe.SlurmHosts(ctx, *r.slurm, names, progress)
	}
	return probe.Hosts(ctx, r.pool, r.targets, progress)
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
