package launcher

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner"
)

// Grouping modes for BuildClusterFile.
const (
	// GroupByHardware puts hosts with identical hardware in one island.
	GroupByHardware = "hardware"
	// GroupPerHost gives every host its own island.
	GroupPerHost = "host"
)

// ClusterOptions controls how probes become a cluster file.
type ClusterOptions struct {
	// NProcPerNode is the number of process slots on a host without GPUs
	// (and overrides nothing on GPU hosts).
	NProcPerNode int
	// Group is GroupByHardware (default) or GroupPerHost.
	Group string
	// Entries gives the host entry (user, port) for a target; missing
	// targets become {Name: target}.
	Entries map[string]planner.HostEntry
	// Measured, when set, is stored in the file and splits a hardware group
	// whose hosts are joined by links much slower than the group's best.
	Measured *planner.MeasuredBandwidth
	// CPUSlotTFLOPS is the compute figure written for one process slot of
	// a GPU-less host (default DefaultCPUSlotTFLOPS).
	CPUSlotTFLOPS float64
}

// DefaultCPUSlotTFLOPS is a nominal bf16 TFLOP/s for one process slot on a
// GPU-less host. The planner needs a figure for every "GPU"; CPU-only
// clusters (test-beds, gloo jobs) only compare hosts of the same kind, so
// the value sets the time scale of predictions, not which plan wins. Edit
// the file (or pass --cpu-tflops) for real CPU training estimates.
const DefaultCPUSlotTFLOPS = 1.0

func (o ClusterOptions) entry(hp *HostProbe) planner.HostEntry {
	if e, ok := o.Entries[hp.Target]; ok {
		return e
	}
	return planner.HostEntry{Name: hp.Target}
}

// entryName is the host's name in the cluster file (and in the measured
// matrix).
func (o ClusterOptions) entryName(hp *HostProbe) string { return o.entry(hp).Name }

// CPUModel is the GPU model name written for hosts without GPUs, whose
// process slots come from --nproc-per-node.
const CPUModel = "cpu"

// hostHardware is the part of a probe that must match for two hosts to
// share an island.
type hostHardware struct {
	gpuModel    string
	gpuCount    int
	gpuMemMiB   int
	nvlink      bool
	nics        string // canonical list of active NICs
	memGiB      int
	cpuCores    int
	nicSpecs    []planner.NICSpec
	memGiBExact float64
}

func (h hostHardware) key() string {
	return fmt.Sprintf("%s|%d|%d|%v|%s|%d|%d", h.gpuModel, h.gpuCount, h.gpuMemMiB, h.nvlink, h.nics, h.memGiB, h.cpuCores)
}

func hardwareOf(hp *HostProbe) hostHardware {
	h := hostHardware{
		gpuCount:    len(hp.GPUs),
		cpuCores:    hp.CPUCores,
		memGiBExact: float64(hp.MemoryBytes) / (1 << 30),
		nicSpecs:    nicSpecs(hp.NICs),
	}
	// MemTotal differs by a few MiB between identical hosts (kernel
	// reservations): compare whole GiB.
	h.memGiB = int(math.Round(h.memGiBExact))
	if len(hp.GPUs) > 0 {
		h.gpuModel = hp.GPUs[0].Name
		h.gpuMemMiB = hp.GPUs[0].MemoryMiB
		for _, g := range hp.GPUs[1:] {
			if g.Name != h.gpuModel {
				h.gpuModel += "+" + g.Name // mixed GPUs never match a uniform host
			}
		}
	}
	h.nvlink = hp.Topology != nil && hp.Topology.NVLinked()
	var parts []string
	for _, s := range h.nicSpecs {
		gid := ""
		if s.GIDIndex != nil {
			gid = fmt.Sprint(*s.GIDIndex)
		}
		parts = append(parts, fmt.Sprintf("%s/%d/%g/%s/%s/%s", s.Type, s.Count, s.RateGbitPerS,
			strings.Join(s.Devices, ","), strings.Join(s.Netdevs, ","), gid))
	}
	h.nics = strings.Join(parts, ";")
	return h
}

// nicSpecs summarises a host's active NICs: one spec per type and rate, in
// the order InfiniBand, RoCE, Ethernet. Inactive ports are left out: a
// down port carries nothing.
func nicSpecs(nics []NIC) []planner.NICSpec {
	type k struct {
		t    planner.NICType
		rate float64
	}
	byKey := map[k]*planner.NICSpec{}
	var keys []k
	for _, n := range nics {
		if !n.Active {
			continue
		}
		key := k{n.Type, n.RateGbitPerS}
		s := byKey[key]
		if s == nil {
			s = &planner.NICSpec{Type: n.Type, RateGbitPerS: n.RateGbitPerS}
			byKey[key] = s
			keys = append(keys, key)
		}
		s.Count++
		if n.Type.RDMA() {
			s.Devices = append(s.Devices, n.Name)
		}
		if n.Netdev != "" {
			s.Netdevs = append(s.Netdevs, n.Netdev)
		}
		if n.GIDIndex != nil && s.GIDIndex == nil {
			g := *n.GIDIndex
			s.GIDIndex = &g
		}
	}
	order := map[planner.NICType]int{planner.NICInfiniBand: 0, planner.NICRoCE: 1, planner.NICEthernet: 2}
	sort.SliceStable(keys, func(a, b int) bool {
		if order[keys[a].t] != order[keys[b].t] {
			return order[keys[a].t] < order[keys[b].t]
		}
		return keys[a].rate > keys[b].rate
	})
	out := make([]planner.NICSpec, 0, len(keys))
	for _, key := range keys {
		out = append(out, *byKey[key])
	}
	return out
}

// BuildClusterFile groups probed hosts into islands and writes every
// host-level value into the island's fields.
func BuildClusterFile(probes []*HostProbe, o ClusterOptions) (*planner.ClusterFile, error) {
	if len(probes) == 0 {
		return nil, fmt.Errorf("no hosts probed")
	}
	for _, hp := range probes {
		if len(hp.GPUs) == 0 && o.NProcPerNode <= 0 {
			return nil, fmt.Errorf("host %s has no GPUs: pass --nproc-per-node N to give each GPU-less host N process slots", hp.Target)
		}
	}
	groups := groupHosts(probes, o)
	f := &planner.ClusterFile{Measured: o.Measured}
	for i, g := range groups {
		f.Clusters = append(f.Clusters, islandSpec(fmt.Sprintf("cluster%d", i+1), g, o))
	}
	return f, nil
}

func groupHosts(probes []*HostProbe, o ClusterOptions) [][]*HostProbe {
	groups := groupInOrder(probes, func(_ int, hp *HostProbe) string {
		if o.Group == GroupPerHost {
			return hp.Target
		}
		return hardwareOf(hp).key()
	})
	if o.Measured == nil {
		return groups
	}
	var split [][]*HostProbe
	for _, g := range groups {
		split = append(split, splitBySpeed(g, o.Measured, o.entryName)...)
	}
	return split
}

// groupInOrder groups hosts by key, groups and members in first-seen order.
func groupInOrder[K comparable](hosts []*HostProbe, key func(int, *HostProbe) K) [][]*HostProbe {
	var groups [][]*HostProbe
	index := map[K]int{}
	for i, hp := range hosts {
		k := key(i, hp)
		g, ok := index[k]
		if !ok {
			g = len(groups)
			index[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], hp)
	}
	return groups
}

func islandSpec(name string, hosts []*HostProbe, o ClusterOptions) planner.IslandSpec {
	h := hardwareOf(hosts[0])
	is := planner.IslandSpec{
		Name:          name,
		GPUsPerHost:   h.gpuCount,
		NICs:          h.nicSpecs,
		HostMemoryGiB: math.Round(h.memGiBExact*10) / 10,
		CPUCores:      h.cpuCores,
		IntraHost:     planner.IntraHostBus{Type: "pcie"},
	}
	if h.nvlink {
		is.IntraHost.Type = "nvlink"
	}
	if h.gpuCount == 0 {
		is.GPUsPerHost = o.NProcPerNode
		is.GPU = cpuSlotSpec(h.memGiBExact, o)
	} else {
		is.GPU = gpuSpec(hosts[0].GPUs[0])
	}
	for _, hp := range hosts {
		e := o.entry(hp)
		if e.Address == "" && hp.Addr != "" && hp.Addr != e.Name {
			e.Address = hp.Addr
		}
		is.Hosts = append(is.Hosts, e)
	}
	return is
}

// cpuSlotSpec describes one process slot of a GPU-less host: its share of
// host memory and a nominal compute rate.
func cpuSlotSpec(hostMemGiB float64, o ClusterOptions) planner.GPUSpec {
	tflops := o.CPUSlotTFLOPS
	if tflops <= 0 {
		tflops = DefaultCPUSlotTFLOPS
	}
	perSlot := math.Floor(hostMemGiB/float64(o.NProcPerNode)*10) / 10
	return planner.GPUSpec{Model: CPUModel, MemoryGiB: perSlot, PeakTFLOPS: tflops}
}

// gpuSpec names the GPU as nvidia-smi does and gives the memory it reports;
// the planner fills TFLOP/s and bandwidth from its catalog by that name.
func gpuSpec(g GPU) planner.GPUSpec {
	return planner.GPUSpec{Model: g.Name, MemoryGiB: math.Round(float64(g.MemoryMiB)/1024*10) / 10}
}
