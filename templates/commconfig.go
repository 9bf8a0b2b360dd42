package templates

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/search"

	_ "embed"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// One network per communicator, with stock Megatron-Core.
//
// NCCL >= 2.17.1 lets each communicator pick its network
// (ncclConfig_t.netName, "IB" or "Socket"); a communicator never mixes
// transports, and an exported NCCL_NET replaces every communicator's choice
// (NCCL init.cc, envConfigOverride: `envNetName = ncclGetEnv("NCCL_NET");
// if (envNetName) tmpNetName = envNetName;`), so NCCL_NET stays unset.
// torch >= 2.1 exposes it as ProcessGroupNCCL.Options().config.net_name.
// Megatron-Core reads it from --nccl-communicator-config-path since
// core_v0.11.0 (commit b4076c78f2, "Standardize NCCL option passing"),
// megatron/core/parallel_state.py:
//
//	def get_nccl_options(pg_name, nccl_comm_cfgs):
//	    if pg_name in nccl_comm_cfgs:
//	        nccl_options = torch.distributed.ProcessGroupNCCL.Options()
//	        nccl_options.config.cga_cluster_size = nccl_comm_cfgs[pg_name].get('cga_cluster_size', 4)
//	        nccl_options.config.max_ctas = nccl_comm_cfgs[pg_name].get('max_ctas', 32)
//	        nccl_options.config.min_ctas = nccl_comm_cfgs[pg_name].get('min_ctas', 1)
//	        if 'net_name' in nccl_comm_cfgs[pg_name]:
//	            nccl_options.config.net_name = nccl_comm_cfgs[pg_name].get('net_name')
//	            if nccl_options.config.net_name.lower() not in ['ib', 'socket']:
//	                raise RuntimeError(...)
//
// and megatron/training/arguments.py:
//
//	group.add_argument('--nccl-communicator-config-path', type=str, default=None,
//	                   help='Path to the yaml file with NCCL communicator configurations. ...')
//
// A key absent from the file leaves that group type on NCCL's default
// network (IB where the host has it), so every key initialize_model_parallel
// passes to get_nccl_options is written; the groups of keys we cannot
// enumerate get Socket, which always connects.
//
// The world group (init_process_group) takes no options from that file,
// yet Megatron runs NCCL collectives on it (training.py's start-time
// all_reduce): a sitecustomize shim (pipette_site/) gives it Socket.

// CommConfigPath is the per-island communicator config a host's ranks
// read, relative to the job's files directory (Job.FilesDir).
func CommConfigPath(island string) string {
	return "nccl_comm_" + safeFileWord(island) + ".yaml"
}

// SiteDir holds the sitecustomize shim that gives the world group its
// network and DeepSpeed's PipelineModule a plan's uneven split; ranks get it
// first on PYTHONPATH.
const SiteDir = "pipette_site"

// Nets per communicator, as NCCL names them (Megatron lowercases them to
// check; NCCL compares case-insensitively).
const (
	NetIB     = "IB"
	NetSocket = "Socket"
)

// megatronGroupKeys are the keys core_v0.11+ initialize_model_parallel
// passes to get_nccl_options, in its order. The ones groupsOf cannot
// enumerate for a plan (hierarchical CP, partial distributed optimizer,
// GTP remat) are written as Socket.
var megatronGroupKeys = []string{
	"dp", "dp_cp", "intra_dp_cp", "inter_dp_cp", "cp", "hcp", "mp", "tp", "pp", "embd", "pos_embd",
	"tp_dp_cp", "tp_dp", "tp_cp", "ep", "ep_tp", "tp_ep_mp", "tp_ep_pp", "ep_dp", "intra_ep_dp", "inter_ep_dp",
	"intra_dist_opt_instance", "gtp_remat", "gtp_remat_dp", "gtp_remat_dp_cp", "expt_gtp_remat", "tp_ep_gtp_remat_pp", "ep_gtp_remat_dp",
}

// heavyKeys carry the traffic the planner prices on RDMA inside islands
// (TP, CP and DP): one that would lose RDMA makes the plan's prices wrong,
// so the job falls back to sockets everywhere instead.
var heavyKeys = map[string]bool{"tp": true, "cp": true, "dp": true, "dp_cp": true, "tp_cp": true, "tp_dp": true, "tp_dp_cp": true, "ep_tp": true, "tp_ep_mp": true, "ep_dp": true}

// pipelineKeys run on sockets whenever the job spans RDMA fabrics: the
// planner prices pipeline send/recv and the embedding all-reduce that way
// (fabric.TransportIslands).
var pipelineKeys = map[string]bool{"pp": true, "embd": true}

// Minimum versions for one network per communicator.
var (
	minNCCL         = []int{2, 17, 1}
	minTorch        = []int{2, 1}
	minMegatronCore = []int{0, 11}
)

// CommConfig is the per-island network of every Megatron group type.
type CommConfig struct {
	// Nets[island][key] is "IB" or "Socket".
	Nets map[int]map[string]string
	// Islands used by the job, in order of first rank.
	Islands []int
}

// groupsOf returns the rank groups of a Megatron group type for the plan
// (order tp-cp-ep-dp-pp, EP 1: rank = tp + TP*(cp + CP*(dp + DP*pp))),
// or nil when the type's groups depend on settings we do not model.
func groupsOf(key string, p *search.Plan) [][]int {
	tp, cp, dp, pp := p.TP, max(p.CP, 1), p.DP, p.PP
	dims := []int{tp, cp, dp, pp}
	vary := map[string][]bool{
		"tp": {true, false, false, false}, "cp": {false, true, false, false}, "dp": {false, false, true, false},
		"pp": {false, false, false, true}, "dp_cp": {false, true, true, false}, "tp_cp": {true, true, false, false},
		"tp_dp": {true, false, true, false}, "tp_dp_cp": {true, true, true, false}, "mp": {true, false, false, true},
		// With EP 1 the expert groups are the dense ones: expert TP = TP,
		// tp-ep = TP, tp-ep-pp = tp-pp, expert DP = dp-cp (cp 1, dp*cp).
		"ep": {false, false, false, false}, "ep_tp": {true, false, false, false}, "tp_ep_mp": {true, false, false, false},
		"tp_ep_pp": {true, false, false, true}, "ep_dp": {false, true, true, false},
	}
	switch key {
	case "embd", "pos_embd":
		var out [][]int
		for _, g := range orthogonalGroups(dims, vary["pp"]) {
			if key == "pos_embd" || len(g) == 1 {
				out = append(out, g[:1])
			} else {
				out = append(out, []int{g[0], g[len(g)-1]})
			}
		}
		return out
	}
	if m, ok := vary[key]; ok {
		return orthogonalGroups(dims, m)
	}
	return nil
}

// orthogonalGroups lists the groups that vary the masked dimensions and
// fix the others (Megatron's generate_masked_orthogonal_rank_groups).
func orthogonalGroups(dims []int, mask []bool) [][]int {
	stride := make([]int, len(dims))
	world := 1
	for i, d := range dims {
		stride[i] = world
		world *= d
	}
	index := map[int]int{}
	var out [][]int
	for rank := 0; rank < world; rank++ {
		key := 0
		for i, d := range dims {
			if !mask[i] {
				key = key*d + (rank/stride[i])%d
			}
		}
		k, ok := index[key]
		if !ok {
			k = len(out)
			index[key] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], rank)
	}
	return out
}

// rdmaDomain names the RDMA fabric an island's hosts reach; "" for an
// island without RDMA NICs.
func rdmaDomain(c *cluster.Cluster, island int) string {
	is := c.Islands[island]
	if !is.RDMA {
		return ""
	}
	if is.Spec.Fabric != "" {
		return "fabric:" + is.Spec.Fabric
	}
	return "island:" + strconv.Itoa(island)
}

// megatronCommConfig decides each group type's network per island. It
// returns the reason to fall back to sockets everywhere when the plan's
// groups cannot be given one network per type and island without taking
// RDMA from a group the planner priced on it.
func megatronCommConfig(c *cluster.Cluster, p *search.Plan, islands []int) (*CommConfig, string) {
	hostOf := make([]int, p.WorldSize())
	for _, r := range p.Placement {
		hostOf[r.Rank] = r.HostIndex
	}
	cfg := &CommConfig{Nets: map[int]map[string]string{}, Islands: islands}
	for _, isl := range islands {
		cfg.Nets[isl] = map[string]string{}
	}
	for _, key := range megatronGroupKeys {
		groups := groupsOf(key, p)
		forced := map[int]bool{}  // islands where a group of this type leaves the RDMA fabric
		wantsIB := map[int]bool{} // islands with a multi-host group inside a fabric
		for _, g := range groups {
			hosts, isls := map[int]bool{}, map[int]bool{}
			domains := map[string]bool{}
			for _, r := range g {
				h := hostOf[r]
				hosts[h] = true
				isl := c.Hosts[h].Island
				isls[isl] = true
				domains[rdmaDomain(c, isl)] = true
			}
			inside := len(domains) == 1 && !domains[""]
			for isl := range isls {
				switch {
				case !inside:
					forced[isl] = true
				case len(hosts) > 1:
					wantsIB[isl] = true
				}
			}
		}
		for _, isl := range islands {
			net := NetIB
			switch {
			case groups == nil, rdmaDomain(c, isl) == "", forced[isl], pipelineKeys[key]:
				net = NetSocket
			}
			if net == NetSocket && wantsIB[isl] && heavyKeys[key] {
				return nil, fmt.Sprintf("the %q group type mixes fabrics: on island %s some of its groups stay on the RDMA fabric and others leave it, and one config key cannot give them different networks", key, c.Islands[isl].Spec.Name)
			}
			cfg.Nets[isl][key] = net
		}
	}
	return cfg, ""
}

// YAML is island isl's communicator config file.
func (cc *CommConfig) YAML(c *cluster.Cluster, isl int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Megatron-Core --nccl-communicator-config-path for the ranks on island %s, written by\n", shellquote.Comment(c.Islands[isl].Spec.Name))
	b.WriteString("# pipette-launch --nccl-mode auto: each process-group type gets one NCCL network (net_name,\n")
	b.WriteString("# core_v0.11+, NCCL >= 2.17.1, torch >= 2.1); IB stays inside the island's RDMA fabric, Socket\n")
	b.WriteString("# crosses islands. NCCL_NET must stay unset: it would override every entry.\n")
	for _, key := range megatronGroupKeys {
		fmt.Fprintf(&b, "%s:\n  net_name: %s\n", key, cc.Nets[isl][key])
	}
	return []byte(b.String())
}

// Summary is "tp IB, dp IB, pp Socket" per island for the plan's main types.
func (cc *CommConfig) Summary(c *cluster.Cluster) string {
	var parts []string
	for _, isl := range cc.Islands {
		var kv []string
		for _, key := range []string{"tp", "cp", "dp", "pp", "embd"} {
			kv = append(kv, key+" "+cc.Nets[isl][key])
		}
		parts = append(parts, c.Islands[isl].Spec.Name+": "+strings.Join(kv, ", "))
	}
	return strings.Join(parts, "; ")
}

// softwareGate is why the hosts cannot pick a network per communicator:
// a component older than needed, or a version nobody recorded. Unknown
// counts as too old: the fallback (sockets) is slower but always runs,
// while a per-communicator config on a stack that ignores it hangs.
func softwareGate(c *cluster.Cluster, islands []int) string {
	var unknown, old []string
	for _, isl := range islands {
		spec := c.Islands[isl].Spec
		sw := cluster.SoftwareVersions{}
		if spec.Software != nil {
			sw = *spec.Software
		}
		for _, comp := range []struct {
			name, v string
			min     []int
		}{{"NCCL", sw.NCCL, minNCCL}, {"torch", sw.Torch, minTorch}, {"Megatron-Core", sw.MegatronCore, minMegatronCore}} {
			nums, ok := cluster.ParseVersion(comp.v)
			switch {
			case !ok:
				unknown = append(unknown, fmt.Sprintf("%s on %s", comp.name, spec.Name))
			case cluster.VersionLess(nums, comp.min):
				old = append(old, fmt.Sprintf("%s %s on %s (needs %s)", comp.name, comp.v, spec.Name, joinVersion(comp.min)))
			}
		}
	}
	switch {
	case len(old) > 0:
		return "too old for one network per communicator: " + strings.Join(old, ", ")
	case len(unknown) > 0:
		return "versions unknown (" + strings.Join(unknown, ", ") + "); `pipette-launch probe` records them, or write clusters[].software {nccl, torch, megatron_core} in the cluster file"
	}
	return ""
}

func joinVersion(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ".")
}

func safeFileWord(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// commConfigBlocker is why the user's arguments or environment rule out
// a per-communicator config ("" when nothing does).
func commConfigBlocker(o Options, userEnv map[string]string) string {
	fl := megatron.Parse(o.Args)
	if v, ok := fl.Last("--nccl-communicator-config-path"); ok {
		return fmt.Sprintf("your --nccl-communicator-config-path %s is kept, and pipette-launch does not edit it to add net_name", v)
	}
	if v, _ := fl.Int("--expert-model-parallel-size", 1); v > 1 {
		return "--expert-model-parallel-size > 1: the expert groups are not modelled"
	}
	for _, e := range o.ExplicitEnv {
		if e.Name == "NCCL_NET" {
			return "NCCL_NET=" + e.Value + " is set, and it overrides every communicator's network"
		}
	}
	if v, ok := userEnv["NCCL_NET"]; ok {
		return "NCCL_NET=" + v + " is in your environment, and it overrides every communicator's network"
	}
	return ""
}

//go:embed site/sitecustomize.py
var siteCustomize []byte

//go:embed site/pipette_ds_partition.py
var dsPartition []byte

// commConfigFiles are the per-island YAML files (the world-group shim comes
// with siteFiles).
func commConfigFiles(c *cluster.Cluster, cc *CommConfig) []job.File {
	var out []job.File
	for _, isl := range cc.Islands {
		out = append(out, job.File{Path: CommConfigPath(c.Islands[isl].Spec.Name), Mode: 0o644, Content: cc.YAML(c, isl)})
	}
	return out
}

// siteFiles are the shims of SiteDir: sitecustomize.py (the world group's
// NCCL network, a DeepSpeed plan's uneven split) and, for an uneven split,
// the partition helper it imports (which a script may also call itself).
func siteFiles(unevenSplit bool) []job.File {
	out := []job.File{{Path: SiteDir + "/sitecustomize.py", Mode: 0o644, Content: siteCustomize}}
	if unevenSplit {
		out = append(out, job.File{Path: SiteDir + "/pipette_ds_partition.py", Mode: 0o644, Content: dsPartition})
	}
	return out
}

func commConfigPaths(c *cluster.Cluster, cc *CommConfig, dir string) []string {
	var out []string
	for _, isl := range cc.Islands {
		out = append(out, path.Join(dir, CommConfigPath(c.Islands[isl].Spec.Name)))
	}
	return out
}
