package templates

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// GroupTransports says which network each main group type gets under
// --nccl-mode auto: "" when the job stays on one fabric.
func GroupTransports(c *cluster.Cluster, p *search.Plan, o Options) string {
	fp, err := decideFabric(c, p, fabric.ModeAuto, o, envMap(o.Env))
	switch {
	case err != nil:
		return ""
	case fp.comm != nil:
		return "one NCCL network per group type (" + fp.comm.Summary(c) + "; the world group Socket)"
	case fp.sockets:
		return "TCP sockets for every group"
	}
	return ""
}

// fabricPlan is the transport decision for the islands a job uses.
type fabricPlan struct {
	// sockets forces TCP sockets on every rank.
	sockets bool
	// perGroup renders Holmes' per-device-type groups.
	perGroup bool
	// comm gives each Megatron group type its network per island
	// (--nccl-communicator-config-path): RDMA inside islands, sockets
	// across them.
	comm *CommConfig
	// fallback is why auto could not give group types their own networks.
	fallback string
	// islands used by the job, in order of first rank.
	islands  []int
	warnings []string
}

// decideFabric applies the mode to the islands the placement uses.
func decideFabric(c *cluster.Cluster, p *search.Plan, mode fabric.Mode, o Options, userEnv map[string]string) (fabricPlan, error) {
	fp := fabricPlan{}
	seen := map[int]bool{}
	for _, r := range p.Placement {
		isl := c.Hosts[r.HostIndex].Island
		if !seen[isl] {
			seen[isl] = true
			fp.islands = append(fp.islands, isl)
		}
	}
	d, err := fabric.Decide(mode, p.Framework, c.FabricIslands(fp.islands))
	if d.NoRDMA && hasAnyNICInfo(c, fp.islands) {
		fp.warnings = append(fp.warnings, "no host of this job has an RDMA NIC (InfiniBand or RoCE): NCCL will use TCP sockets, expect slower collectives")
	}
	if err != nil {
		return fp, err
	}
	fp.sockets = d.Sockets
	if d.PerGroup {
		if err := checkGroupsInsideIslands(c, p); err != nil {
			return fp, err
		}
		fp.perGroup = true
	}
	if d.PerCommunicator {
		cc, why := islandsCommConfig(c, p, fp.islands, o, userEnv)
		if cc != nil {
			fp.comm = cc
		} else {
			fp.sockets, fp.fallback = true, why
			fp.warnings = append(fp.warnings, "the job spans islands without a shared RDMA fabric: every rank uses TCP sockets (NCCL_IB_DISABLE=1) because a communicator mixing transports hangs, and RDMA cannot be kept inside islands: "+why)
		}
	}
	return fp, nil
}

// IslandsFallback is why a plan spanning RDMA islands runs on sockets
// everywhere under --nccl-mode auto; "" when each group type gets its own
// network. The planner prices a job both ways: callers plan with
// fabric.TransportIslands and plan again on sockets when this is not "".
func IslandsFallback(c *cluster.Cluster, p *search.Plan, o Options) string {
	fp, err := decideFabric(c, p, fabric.ModeAuto, o, envMap(o.Env))
	if err != nil {
		return err.Error()
	}
	return fp.fallback
}

// IslandsFallbackAhead is IslandsFallback known before planning, for the
// callers that plan with fabric.TransportIslands and then plan again on
// sockets: every plan places ranks on all of c's hosts, so when c's
// islands get one network per communicator under --nccl-mode auto and
// what rules that out does not depend on the plan (the framework, the
// user's flags and environment, the islands' software versions), every
// plan falls back, and pricing one for per-island transports first is a
// wasted search (issue 23: it doubled `plan`'s time on three islands).
// "" when the answer depends on the plan.
func IslandsFallbackAhead(c *cluster.Cluster, f parallel.Framework, o Options) string {
	var islands []int
	seen := map[int]bool{}
	for _, h := range c.Hosts {
		if !seen[h.Island] {
			seen[h.Island] = true
			islands = append(islands, h.Island)
		}
	}
	if f == "" || f == parallel.FrameworkTorch {
		f = parallel.FrameworkMegatron // as the search plans it
	}
	d, err := fabric.Decide(fabric.ModeAuto, f, c.FabricIslands(islands))
	if err != nil || !d.PerCommunicator {
		return ""
	}
	return commConfigGate(c, f, islands, o, envMap(o.Env))
}

// islandsCommConfig is the per-communicator config for a Megatron job
// across islands, or nil and why it cannot be used.
func islandsCommConfig(c *cluster.Cluster, p *search.Plan, islands []int, o Options, userEnv map[string]string) (*CommConfig, string) {
	if why := commConfigGate(c, p.Framework, islands, o, userEnv); why != "" {
		return nil, why
	}
	return megatronCommConfig(c, p, islands)
}

// commConfigGate is what rules out one network per communicator whatever
// the plan: the framework, the user's flags and environment, the islands'
// software versions; "" when nothing does.
func commConfigGate(c *cluster.Cluster, f parallel.Framework, islands []int, o Options, userEnv map[string]string) string {
	if f != parallel.FrameworkMegatron {
		return fmt.Sprintf("pipette-launch renders one network per communicator for Megatron-LM only (%s scripts can create their groups with examples/pipette_nccl_groups.py)", f)
	}
	if why := commConfigBlocker(o, userEnv); why != "" {
		return why
	}
	return softwareGate(c, islands)
}

func hasAnyNICInfo(c *cluster.Cluster, islands []int) bool {
	for _, i := range islands {
		if len(c.Islands[i].Spec.NICs) > 0 {
			return true
		}
	}
	return false
}

// checkGroupsInsideIslands fails when a TP, CP or DP group of the plan spans
// islands: with per-group transports only pipeline send/recv may cross, as
// Holmes requires; any other group would need RDMA the hosts lack.
func checkGroupsInsideIslands(c *cluster.Cluster, p *search.Plan) error {
	island := make(map[int]int, len(p.Placement))
	for _, r := range p.Placement {
		island[r.Rank] = c.Hosts[r.HostIndex].Island
	}
	tp, cp, dp := p.TP, max(p.CP, 1), p.DP
	stageSize := tp * cp * dp
	for rank := range p.WorldSize() {
		// Every rank of one pipeline stage must share an island.
		first := (rank / stageSize) * stageSize
		if island[rank] != island[first] {
			return fmt.Errorf("plan puts ranks %d and %d (same pipeline stage, TP/CP/DP groups) on islands %s and %s, which share no RDMA fabric: --nccl-mode per-group needs those groups inside one island; use --nccl-mode sockets",
				first, rank, c.Islands[island[first]].Spec.Name, c.Islands[island[rank]].Spec.Name)
		}
	}
	return nil
}

// hostNCCLEnv returns the NCCL and gloo settings for one host.
func hostNCCLEnv(c *cluster.Cluster, hostIdx int, fp fabricPlan) ([]job.EnvVar, []string, error) {
	h := c.Hosts[hostIdx]
	spec := c.Islands[h.Island].Spec
	if len(spec.NICs) == 0 {
		return nil, nil, nil // nothing probed: leave NCCL to its own detection
	}
	multiIsland := len(fp.islands) > 1
	sock, sockRate := socketNetdevs(spec.NICs, multiIsland)
	var env []job.EnvVar
	var warnings []string
	if len(sock) > 0 {
		env = append(env, job.EnvVar{Name: "NCCL_SOCKET_IFNAME", Value: "=" + strings.Join(sock, ",")},
			job.EnvVar{Name: "GLOO_SOCKET_IFNAME", Value: sock[0]})
	}
	rdma := rdmaNIC(spec.NICs)
	if fp.comm != nil && rdma != nil && len(sock) > 0 {
		// The Socket communicators' threads, sized to the Ethernet link.
		threads, socks := socketThreads(sockRate)
		env = append(env, job.EnvVar{Name: "NCCL_SOCKET_NTHREADS", Value: strconv.Itoa(threads)},
			job.EnvVar{Name: "NCCL_NSOCKS_PERTHREAD", Value: strconv.Itoa(socks)})
	}
	if fp.sockets || rdma == nil {
		rate := sockRate
		if len(sock) == 0 {
			var ok bool
			if rate, ok = ethernetRate(spec.NICs); !ok {
				return nil, nil, fmt.Errorf("host %s (island %s) has no Ethernet NIC, but this job needs TCP sockets to reach the other islands; add the island's Ethernet NIC to the cluster file or keep the job inside one fabric", h.Name, spec.Name)
			}
			warnings = append(warnings, fmt.Sprintf("island %s: Ethernet interface names unknown, NCCL_SOCKET_IFNAME is left to NCCL (it may pick a wrong interface); `pipette-launch probe` records them", spec.Name))
		}
		threads, socks := socketThreads(rate)
		return append(env, job.EnvVar{Name: "NCCL_IB_DISABLE", Value: "1"},
			job.EnvVar{Name: "NCCL_SOCKET_NTHREADS", Value: strconv.Itoa(threads)},
			job.EnvVar{Name: "NCCL_NSOCKS_PERTHREAD", Value: strconv.Itoa(socks)}), warnings, nil
	}
	if len(rdma.Devices) == 0 {
		// NCCL then uses every RDMA device it finds, which works but may
		// pick a port on the wrong fabric: say so rather than guess names.
		return env, []string{fmt.Sprintf("island %s: %s NICs without device names, NCCL_IB_HCA is left to NCCL's detection; `pipette-launch probe` records them", spec.Name, rdma.Type)}, nil
	}
	env = append(env, job.EnvVar{Name: "NCCL_IB_HCA", Value: "=" + strings.Join(rdma.Devices, ",")})
	if rdma.Type == cluster.NICRoCE && rdma.GIDIndex != nil {
		env = append(env, job.EnvVar{Name: "NCCL_IB_GID_INDEX", Value: strconv.Itoa(*rdma.GIDIndex)})
	}
	return env, nil, nil
}

// ethernetRate is the aggregate rate of the Ethernet-capable NICs (plain
// Ethernet, else RoCE); false when the host has none.
func ethernetRate(nics []cluster.NICSpec) (float64, bool) {
	for _, t := range []cluster.NICType{cluster.NICEthernet, cluster.NICRoCE} {
		rate, found := 0.0, false
		for _, n := range nics {
			if n.Type == t {
				rate += n.RateGbitPerS * float64(max(n.Count, 1))
				found = true
			}
		}
		if found {
			return rate, true
		}
	}
	return 0, false
}

// rdmaNIC returns the host's fastest RDMA NIC spec, nil when it has none.
func rdmaNIC(nics []cluster.NICSpec) *cluster.NICSpec {
	var best *cluster.NICSpec
	for i := range nics {
		n := &nics[i]
		if n.Type.RDMA() && (best == nil || n.RateGbitPerS*float64(max(n.Count, 1)) > best.RateGbitPerS*float64(max(best.Count, 1))) {
			best = n
		}
	}
	return best
}

// socketNetdevs picks the interfaces NCCL's sockets (and its bootstrap) use:
// plain Ethernet first, then RoCE netdevs (Ethernet too), then IPoIB, which
// only reaches the same IB fabric and so is not offered to multi-island jobs.
func socketNetdevs(nics []cluster.NICSpec, multiIsland bool) ([]string, float64) {
	for _, t := range []cluster.NICType{cluster.NICEthernet, cluster.NICRoCE, cluster.NICInfiniBand} {
		if t == cluster.NICInfiniBand && multiIsland {
			break
		}
		var devs []string
		rate := 0.0
		for _, n := range nics {
			if n.Type == t && len(n.Netdevs) > 0 {
				devs = append(devs, n.Netdevs...)
				rate += n.RateGbitPerS * float64(max(n.Count, 1))
			}
		}
		if len(devs) > 0 {
			return devs, rate
		}
	}
	return nil, 0
}

// socketThreads sizes NCCL's socket transport to the link: more sockets
// keep a fast TCP link full (nccl-and-nics.md: they help plain Ethernet a
// lot), and NCCL caps threads x sockets at 64.
func socketThreads(rateGbit float64) (threads, socksPerThread int) {
	switch {
	case rateGbit >= 100:
		return 8, 8
	case rateGbit >= 25:
		return 4, 8
	case rateGbit >= 10:
		return 4, 4
	default:
		return 2, 2
	}
}

// holmesArgs renders Holmes' heterogeneous-network flags for a rank on a
// host: device types in pipeline order, then per type the number of stages
// and each stage's layers.
func holmesArgs(c *cluster.Cluster, p *search.Plan, hostIdx int, numLayers int) ([]string, error) {
	if max(p.VPP, 1) > 1 {
		return nil, fmt.Errorf("--nccl-mode per-group (Holmes) does not support virtual pipeline stages; plan again with VPP 1 or use --nccl-mode sockets")
	}
	stages := p.StageLayers
	if len(stages) == 0 {
		for range p.PP {
			stages = append(stages, numLayers/p.PP)
		}
	}
	stageIsland := make([]int, p.PP)
	stageSize := p.TP * max(p.CP, 1) * p.DP
	for _, r := range p.Placement {
		stageIsland[r.Rank/stageSize] = c.Hosts[r.HostIndex].Island
	}
	var types []string
	var counts [][]int
	for s := range p.PP {
		t := deviceType(c.Islands[stageIsland[s]])
		if s == 0 || stageIsland[s] != stageIsland[s-1] {
			for _, seen := range types {
				if seen == t {
					return nil, fmt.Errorf("--nccl-mode per-group: Holmes needs each island's pipeline stages contiguous, but stage %d returns to the %s island; use --nccl-mode sockets or another plan (--plan N)", s, t)
				}
			}
			types = append(types, t)
			counts = append(counts, nil)
		}
		counts[len(counts)-1] = append(counts[len(counts)-1], stages[s])
	}
	a := []string{"--use-hetnet", "--hetero-mode", "pp",
		"--hetero-current-device-type", deviceType(c.Islands[c.Hosts[hostIdx].Island]),
		"--hetero-device-types"}
	a = append(a, types...)
	a = append(a, "--hetero-pipeline-stages")
	for _, cs := range counts {
		a = append(a, strconv.Itoa(len(cs)))
		for _, n := range cs {
			a = append(a, strconv.Itoa(n))
		}
	}
	return a, nil
}

// deviceType names an island for Holmes by its fastest NIC (ib, roce,
// ethernet), as in Holmes' own scripts.
func deviceType(is cluster.Island) string {
	if n := rdmaNIC(is.Spec.NICs); n != nil {
		if n.Type == cluster.NICInfiniBand {
			return "ib"
		}
		return "roce"
	}
	return "ethernet"
}

func sortEnv(env []job.EnvVar) {
	sort.SliceStable(env, func(i, j int) bool { return env[i].Name < env[j].Name })
}
