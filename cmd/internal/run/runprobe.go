package run

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// probeLaunch runs the quick pre-launch probe over a new pool, which the
// launch then reuses (Options.ProbeLaunch when nil). A nil probe means
// "nothing known".
func probeLaunch(ctx context.Context, targets []remote.HostTarget, rank0 int, python string, opts *Options) (*launchprobe.Result, *remote.Pool, error) {
	if opts.local {
		return launchprobe.Local(python), nil, nil
	}
	if opts.slurm != nil {
		nodes := make([]string, len(targets))
		for i, t := range targets {
			nodes[i] = t.Name
		}
		lp, err := launchprobe.SlurmHosts(ctx, *opts.slurm, nodes, rank0, python)
		return lp, nil, err
	}
	pool := remote.NewPool(opts.SSH, opts.Fanout)
	lp, err := launchprobe.Hosts(ctx, pool, targets, rank0, python)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return lp, pool, nil
}

// launchFacts is what a real launch learns from the hosts before
// rendering: where the ranks meet and which interpreter runs .py scripts.
type launchFacts struct {
	rendezvous *templates.Rendezvous
	python     string
	warnings   []string
}

// probeForLaunch probes the hosts the plan uses: rank 0's address, each
// host's interface towards it, and whether the launching shell's python3
// exists there too. What it finds over SSH is cached for --dry-run and
// --output-dir.
func probeForLaunch(ctx context.Context, o *Options, c *cluster.Cluster, p *search.Plan) (*launchFacts, error) {
	targets, hostIdx, rank0 := probeTargets(c, p)
	candidate := pythonCandidate(o)
	lp, pool, err := o.probeLaunch()(ctx, targets, rank0, candidate, o)
	if err != nil {
		return nil, fmt.Errorf("prepare launch: %w", err)
	}
	o.pool = pool
	if lp != nil && o.slurm == nil && !o.local {
		if err := launchProbeCache(o).Save(targets, rank0, candidate, lp); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "pipette-launch: warning: %v\n", err)
		}
	}
	if err := checkHealth(o, lp, targets, hostIdx, c, p); err != nil {
		if pool != nil {
			pool.Close()
			o.pool = nil
		}
		return nil, fmt.Errorf("prepare launch: %w", err)
	}
	return launchFactsFrom(o, lp, targets, hostIdx, candidate, c), nil
}

// checkHealth is the health check before a (re)start, from the launch
// probe's sysfs reading (launchprobe.HostRoute.Health): on each host, the
// interface the job's traffic takes and the RDMA ports and interfaces its
// island's NICs name in the cluster file must be up, and, with a cluster
// file, the GPUs the plan runs on there must be visible. The hosts that
// fail it are named in a *remote.HostErrors (an elastic job leaves them
// out).
func checkHealth(o *Options, lp *launchprobe.Result, targets []remote.HostTarget, hostIdx []int, c *cluster.Cluster, p *search.Plan) error {
	if lp == nil {
		return nil
	}
	needs := healthNeeds(o, c, p)
	var failed remote.HostErrors
	for i, hr := range lp.Hosts {
		n := needs[c.Hosts[hostIdx[i]].Name]
		if err := hr.Health(append([]string{hr.Ifname}, n.Links...), n.GPUs); err != nil {
			failed.Add(targets[i].String(), err)
		}
	}
	return failed.ErrorOrNil()
}

// healthNeeds is what each host's health check asks of it, by host name:
// the RDMA ports and interfaces its island's NICs name in the cluster
// file, and, with a cluster file, the GPUs the plan runs on it.
func healthNeeds(o *Options, c *cluster.Cluster, p *search.Plan) map[string]launchprobe.Needs {
	ranks := map[int]int{}
	for _, r := range p.Placement {
		ranks[r.HostIndex]++
	}
	out := map[string]launchprobe.Needs{}
	for i, h := range c.Hosts {
		var n launchprobe.Needs
		for _, nic := range c.Islands[h.Island].Spec.NICs {
			n.Links = append(append(n.Links, nic.Devices...), nic.Netdevs...)
		}
		switch {
		case o.ClusterFile != "":
			n.GPUs = ranks[i]
		case o.local:
			// This machine's ranks run on its GPUs when nvidia-smi listed
			// as many at the start (else they are CPU ranks).
			if gpus, _ := cmdutil.LocalGPUs(context.Background()); gpus >= ranks[i] {
				n.GPUs = ranks[i]
			}
		}
		out[h.Name] = n
	}
	return out
}

// probeTargets are the hosts the plan uses, in placement order, their
// indexes in the cluster, and which of them runs rank 0.
func probeTargets(c *cluster.Cluster, p *search.Plan) (targets []remote.HostTarget, hostIdx []int, rank0 int) {
	seen := map[int]bool{}
	for _, r := range p.Placement {
		if seen[r.HostIndex] {
			continue
		}
		seen[r.HostIndex] = true
		h := c.Hosts[r.HostIndex]
		targets = append(targets, remote.HostTarget{Name: h.Name, Addr: cmp.Or(h.Address, h.Name), User: h.User, Port: h.Port})
		hostIdx = append(hostIdx, r.HostIndex)
	}
	for _, r := range p.Placement {
		if r.Rank == 0 {
			for i, hi := range hostIdx {
				if hi == r.HostIndex {
					rank0 = i
				}
			}
		}
	}
	return targets, hostIdx, rank0
}

// pythonCandidate is the interpreter the probe checks on the hosts: the
// launching shell's python3, unless --python or --no-python decide.
func pythonCandidate(o *Options) string {
	if o.Python == "" && !o.NoPython {
		return lookPathIn(cmdutil.EnvLookup(o.Env)("PATH"), "python3")
	}
	return ""
}

// launchFactsFrom turns a launch probe (nil: nothing known) into what the
// render needs, with warnings for hosts lacking an interface or python.
func launchFactsFrom(o *Options, lp *launchprobe.Result, targets []remote.HostTarget, hostIdx []int, candidate string, c *cluster.Cluster) *launchFacts {
	facts := &launchFacts{python: o.Python}
	if lp == nil {
		return facts
	}
	rv := &templates.Rendezvous{Addr: lp.MasterAddr, Ifnames: make([]string, len(c.Hosts))}
	var missingPython, noIface []string
	for i, hr := range lp.Hosts {
		rv.Ifnames[hostIdx[i]] = hr.Ifname
		if hr.Ifname == "" {
			noIface = append(noIface, fmt.Sprintf("%s (%s)", targets[i].Name, hr.Problem))
		}
		if candidate != "" && !hr.PythonFound {
			missingPython = append(missingPython, targets[i].Name)
		}
	}
	facts.rendezvous = rv
	if len(noIface) > 0 {
		facts.warnings = append(facts.warnings, "no interface towards rank 0's address "+lp.MasterAddr+" found on "+strings.Join(noIface, ", ")+": GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME are left unset there")
	}
	switch {
	case candidate == "":
	case len(missingPython) == 0:
		facts.python = candidate
	default:
		facts.warnings = append(facts.warnings, fmt.Sprintf("your python3 (%s) does not exist on %s: scripts run under the hosts' own python3 (give --python PATH to choose)", candidate, strings.Join(missingPython, ", ")))
	}
	return facts
}

// launchProbeCache is where launch probes are kept: the user's cache
// directory (XDG_CACHE_HOME, else ~/.cache) of the environment
// pipette-launch runs in, as probe's measurements.
func launchProbeCache(o *Options) launchprobe.Cache {
	get := cmdutil.EnvLookup(o.Env)
	dir := get("XDG_CACHE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		dir = filepath.Join(get("HOME"), ".cache")
	}
	return launchprobe.Cache{Dir: filepath.Join(dir, "pipette-launch")}
}

// withCachedProbe is --dry-run's and --output-dir's view of where the
// ranks meet: for an SSH job (not a local one, not Slurm's), the launch probe a launch of these hosts
// cached (younger than --probe-max-age), or one run now with --reprobe,
// renders MASTER_ADDR and each host's interface as a launch would; a
// missing one is said (o.probeNote).
func withCachedProbe(ctx context.Context, o *Options, c *cluster.Cluster, p *search.Plan, render func(*launchFacts) (*job.Job, error), job *job.Job) (*job.Job, error) {
	if onExample(o) || o.slurm != nil || o.local {
		return job, nil
	}
	targets, hostIdx, rank0 := probeTargets(c, p)
	candidate := pythonCandidate(o)
	cache := launchProbeCache(o)
	maxAge := cmp.Or(o.ProbeMaxAge, launchprobe.DefaultMaxAge)
	var lp *launchprobe.Result
	if o.Reprobe {
		var pool *remote.Pool
		var err error
		if lp, pool, err = o.probeLaunch()(ctx, targets, rank0, candidate, o); err != nil {
			return nil, fmt.Errorf("--reprobe: %w", err)
		}
		if pool != nil {
			pool.Close()
		}
		if lp != nil {
			if err := cache.Save(targets, rank0, candidate, lp); err != nil {
				fmt.Fprintf(o.IO.ErrOut, "pipette-launch: warning: %v\n", err)
			}
		}
	} else {
		lp, _ = cache.Load(targets, rank0, candidate, maxAge, time.Now())
	}
	if lp == nil {
		o.probeNote = fmt.Sprintf("where ranks meet: no launch probe of these hosts younger than %s is cached, so MASTER_ADDR is rank 0's host as listed and GLOO_SOCKET_IFNAME/NCCL_SOCKET_IFNAME are not set; a launch probes them (--reprobe probes now)", maxAge)
		return job, nil
	}
	facts := launchFactsFrom(o, lp, targets, hostIdx, candidate, c)
	j, err := render(facts)
	if err != nil {
		return nil, err
	}
	j.Warnings = append(j.Warnings, facts.warnings...)
	var ifs []string
	for i, hr := range lp.Hosts {
		ifs = append(ifs, targets[i].Name+" "+cmp.Or(hr.Ifname, "?"))
	}
	o.probeNote = fmt.Sprintf("where ranks meet: from the launch probe of %s (%s old; a launch probes again, --reprobe now): MASTER_ADDR %s; interfaces %s",
		lp.ProbedAt.Format(time.RFC3339), time.Since(lp.ProbedAt).Round(time.Second), lp.MasterAddr, strings.Join(ifs, ", "))
	return j, nil
}

// lookPathIn is exec.LookPath over a given PATH value: the launching
// shell's (a venv's or conda env's python3 comes first there). Only
// absolute results count: a relative PATH entry means nothing on a host.
func lookPathIn(path, name string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
