package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipette-launch/pipette-launch/launcher"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/templates"
)

// probeLaunch runs the quick pre-launch probe over a new pool, which the
// launch then reuses; tests replace it. A nil probe means "nothing known".
var probeLaunch = func(ctx context.Context, targets []launcher.HostTarget, rank0 int, python string, opts *RunOptions) (*launcher.LaunchProbe, *launcher.Pool, error) {
	if opts.local {
		return launcher.LocalLaunchProbe(python), nil, nil
	}
	if opts.slurm != nil {
		nodes := make([]string, len(targets))
		for i, t := range targets {
			nodes[i] = t.Name
		}
		lp, err := launcher.ProbeLaunchSlurm(ctx, *opts.slurm, nodes, rank0, python)
		return lp, nil, err
	}
	pool := launcher.NewPool(opts.SSH, opts.Fanout)
	lp, err := launcher.ProbeLaunch(ctx, pool, targets, rank0, python)
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
// exists there too.
func probeForLaunch(ctx context.Context, o *RunOptions, c *planner.Cluster, p *planner.Plan) (*launchFacts, error) {
	var targets []launcher.HostTarget
	var hostIdx []int
	seen := map[int]bool{}
	rank0 := 0
	for _, r := range p.Placement {
		if seen[r.HostIndex] {
			continue
		}
		seen[r.HostIndex] = true
		h := c.Hosts[r.HostIndex]
		targets = append(targets, launcher.HostTarget{Name: h.Name, Addr: cmp.Or(h.Address, h.Name), User: h.User, Port: h.Port})
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
	candidate := ""
	if o.Python == "" && !o.NoPython {
		candidate = lookPathIn(envLookup(o.Env)("PATH"), "python3")
	}
	lp, pool, err := probeLaunch(ctx, targets, rank0, candidate, o)
	if err != nil {
		return nil, fmt.Errorf("prepare launch: %w", err)
	}
	o.pool = pool
	facts := &launchFacts{python: o.Python}
	if lp == nil {
		return facts, nil
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
	return facts, nil
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
