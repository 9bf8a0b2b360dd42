package templates

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"

	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

//go:embed site/pipette_preflight.py
var preflightScript []byte

// Files of a preflight job, relative to the work directory.
const (
	PreflightScriptFile = "pipette_preflight.py"
	PreflightSpecFile   = "pipette_preflight.json"
)

// PreflightGroup is one communicator the preflight exercises: an
// all-reduce group (TP, CP, DP) or one pipeline link (send/recv).
type PreflightGroup struct {
	ID    string   `json:"id"`
	Type  string   `json:"type"`
	Op    string   `json:"op"` // allreduce or sendrecv
	Ranks []int    `json:"ranks"`
	Hosts []string `json:"hosts"` // host of each rank
	// Net is the NCCL net_name the job's own communicator of this type
	// gets (one network per group type); empty: the process-wide choice.
	Net string `json:"net,omitempty"`
	// Transport is what the rendered settings give the group between its
	// hosts: IB, Socket, or intra-host when all ranks share a host.
	Transport string `json:"transport"`
	// AssumedBytesPerS is the plan's figure for the group's slowest hop
	// (the cluster file's links, as the planner prices them).
	AssumedBytesPerS float64 `json:"assumed_bytes_per_s"`
}

// PreflightPhase holds groups of one type that run at once (disjoint).
type PreflightPhase struct {
	Name   string           `json:"name"`
	Groups []PreflightGroup `json:"groups"`
}

// PreflightSpec is what every preflight rank reads.
type PreflightSpec struct {
	TimeoutS    float64          `json:"timeout_s"`
	Bytes       int              `json:"bytes"`
	Iters       int              `json:"iters"`
	StartSlackS float64          `json:"start_slack_s"`
	Phases      []PreflightPhase `json:"phases"`
}

// PreflightOptions size the test.
type PreflightOptions struct {
	// Timeout bounds every connection and operation (default 30s).
	Timeout time.Duration
	// Bytes per all-reduce and message (default 16 MiB); Iters timed
	// repetitions after one warm-up (default 3).
	Bytes, Iters int
	// Python runs the preflight script (default python3).
	Python string
}

// Preflight turns a rendered job into its preflight: the same hosts,
// ranks and per-rank environment, each rank running the collective test
// instead of the training script.
func Preflight(j *job.Job, c *cluster.Cluster, p *search.Plan, o Options, po PreflightOptions) (*job.Job, *PreflightSpec, error) {
	o = withDefaults(o)
	if po.Timeout <= 0 {
		po.Timeout = 30 * time.Second
	}
	if po.Bytes <= 0 {
		po.Bytes = 16 << 20
	}
	if po.Iters <= 0 {
		po.Iters = 3
	}
	if po.Python == "" {
		po.Python = o.Python
	}
	fp, err := decideFabric(c, p, o.NCCLMode, o, envMap(o.Env))
	if err != nil {
		return nil, nil, err
	}
	spec := &PreflightSpec{TimeoutS: po.Timeout.Seconds(), Bytes: po.Bytes, Iters: po.Iters, StartSlackS: 120,
		Phases: preflightPhases(c, p, fp)}
	data, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		return nil, nil, err
	}
	// The job's own files directory: never over the user's files.
	pj := &job.Job{Name: j.Name, WorkDir: j.WorkDir, FilesDir: j.FilesDir, LogDir: j.LogDir, StopGrace: j.StopGrace,
		Files: []job.File{{Path: PreflightScriptFile, Mode: 0o644, Content: preflightScript}, {Path: PreflightSpecFile, Mode: 0o644, Content: data}}}
	for _, h := range j.Hosts {
		hj := h
		hj.Ranks = nil
		for _, r := range h.Ranks {
			r.Argv = []string{po.Python, "-u", path.Join(j.FilesDir, PreflightScriptFile), path.Join(j.FilesDir, PreflightSpecFile)}
			hj.Ranks = append(hj.Ranks, r)
		}
		pj.Hosts = append(pj.Hosts, hj)
	}
	for i := range pj.Hosts {
		if pj.Hosts[i].Script, err = job.HostScript(pj, i); err != nil {
			return nil, nil, err
		}
	}
	return pj, spec, nil
}

// preflightPhases: every TP, CP and DP group with more than one rank, then
// every pipeline link, even stages then odd (a rank is in one link of each).
func preflightPhases(c *cluster.Cluster, p *search.Plan, fp fabricPlan) []PreflightPhase {
	hostOf := make([]int, p.WorldSize())
	for _, r := range p.Placement {
		hostOf[r.Rank] = r.HostIndex
	}
	group := func(id, typ, op string, ranks []int) PreflightGroup {
		g := PreflightGroup{ID: id, Type: typ, Op: op, Ranks: ranks}
		hosts := []int{}
		for _, r := range ranks {
			g.Hosts = append(g.Hosts, c.Hosts[hostOf[r]].Name)
			if len(hosts) == 0 || hosts[len(hosts)-1] != hostOf[r] {
				hosts = append(hosts, hostOf[r])
			}
		}
		g.Transport, g.Net = groupTransport(c, fp, typ, hosts)
		g.AssumedBytesPerS = assumedBytesPerS(c, hosts, typ == "pp")
		return g
	}
	// Never null in the spec: a one-rank job has no phase, and its rank
	// still starts, meets the others (none) and reports done.
	phases := []PreflightPhase{}
	for _, typ := range []string{"tp", "cp", "dp"} {
		ph := PreflightPhase{Name: typ}
		for i, ranks := range groupsOf(typ, p) {
			if len(ranks) > 1 {
				ph.Groups = append(ph.Groups, group(typ+strconv.Itoa(i), typ, "allreduce", ranks))
			}
		}
		if len(ph.Groups) > 0 {
			phases = append(phases, ph)
		}
	}
	for parity, name := range []string{"pp-even", "pp-odd", "pp-wrap"} {
		ph := PreflightPhase{Name: name}
		for _, pipe := range groupsOf("pp", p) {
			n := len(pipe)
			if parity == 2 && max(p.VPP, 1) > 1 && n > 2 {
				// The interleaved schedule also sends from the last stage
				// back to the first.
				ph.Groups = append(ph.Groups, group(fmt.Sprintf("pp%d-%d", pipe[n-1], pipe[0]), "pp", "sendrecv", []int{pipe[n-1], pipe[0]}))
			}
			for s := parity; parity < 2 && s+1 < n; s += 2 {
				ph.Groups = append(ph.Groups, group(fmt.Sprintf("pp%d-%d", pipe[s], pipe[s+1]), "pp", "sendrecv", []int{pipe[s], pipe[s+1]}))
			}
		}
		if len(ph.Groups) > 0 {
			phases = append(phases, ph)
		}
	}
	return phases
}

// groupTransport is the network the rendered settings give a group
// between its hosts, and the net_name of its communicator when the job
// picks one per group type.
func groupTransport(c *cluster.Cluster, fp fabricPlan, key string, hosts []int) (string, string) {
	distinct := map[int]bool{}
	for _, h := range hosts {
		distinct[h] = true
	}
	net := ""
	if fp.comm != nil {
		net = fp.comm.Nets[c.Hosts[hosts[0]].Island][key]
	}
	switch {
	case len(distinct) == 1:
		return "intra-host", net
	case net != "":
		return net, net
	case fp.sockets:
		return NetSocket, ""
	}
	for h := range distinct {
		if !c.Islands[c.Hosts[h].Island].RDMA {
			return NetSocket, ""
		}
	}
	return NetIB, ""
}

// assumedBytesPerS is the plan's slowest hop of the group's ring.
func assumedBytesPerS(c *cluster.Cluster, hosts []int, pipeline bool) float64 {
	if len(hosts) == 1 || slices.Min(hosts) == slices.Max(hosts) {
		return c.LinkBetween(hosts[0], hosts[0]).BytesPerS
	}
	worst := math.Inf(1)
	for i := range hosts {
		a, b := hosts[i], hosts[(i+1)%len(hosts)]
		if a == b {
			continue
		}
		l := c.LinkBetween(a, b)
		if pipeline {
			l = c.PipelineLinkBetween(a, b)
		}
		worst = min(worst, l.BytesPerS)
	}
	return worst
}
