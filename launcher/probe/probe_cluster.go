package probe

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
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
	Entries map[string]cluster.HostEntry
	// Measured, when set, is stored in the file and splits a hardware group
	// whose hosts are joined by links much slower than the group's best.
	Measured *cluster.MeasuredBandwidth
	// MeasuredCompute, when set, is stored in the file as it is.
	MeasuredCompute *cluster.MeasuredCompute
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

func (o ClusterOptions) entry(hp *HostProbe) cluster.HostEntry {
	if e, ok := o.Entries[hp.Target]; ok {
		return e
	}
	return cluster.HostEntry{Name: hp.Target}
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
	intraType   string
	pcieGen     int
	nics        string // canonical list of active NICs
	memGiB      int
	cpuCores    int
	nicSpecs    []cluster.NICSpec
	memGiBExact float64
}

func (h hostHardware) key() string {
	return fmt.Sprintf("%s|%d|%d|%s|%d|%s|%d|%d", h.gpuModel, h.gpuCount, h.gpuMemMiB, h.intraType, h.pcieGen, h.nics, h.memGiB, h.cpuCores)
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
		h.pcieGen = hp.GPUs[0].PCIeGenMax
		for _, g := range hp.GPUs[1:] {
			if g.Name != h.gpuModel {
				h.gpuModel += "+" + g.Name // mixed GPUs never match a uniform host
			}
		}
	}
	h.intraType = intraHostType(hp)
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
func nicSpecs(nics []NIC) []cluster.NICSpec {
	type k struct {
		t    cluster.NICType
		rate float64
	}
	byKey := map[k]*cluster.NICSpec{}
	var keys []k
	for _, n := range nics {
		if !n.Active {
			continue
		}
		key := k{n.Type, n.RateGbitPerS}
		s := byKey[key]
		if s == nil {
			s = &cluster.NICSpec{Type: n.Type, RateGbitPerS: n.RateGbitPerS}
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
	order := map[cluster.NICType]int{cluster.NICInfiniBand: 0, cluster.NICRoCE: 1, cluster.NICEthernet: 2}
	sort.SliceStable(keys, func(a, b int) bool {
		if order[keys[a].t] != order[keys[b].t] {
			return order[keys[a].t] < order[keys[b].t]
		}
		return keys[a].rate > keys[b].rate
	})
	out := make([]cluster.NICSpec, 0, len(keys))
	for _, key := range keys {
		out = append(out, *byKey[key])
	}
	return out
}

// BuildClusterFile groups probed hosts into islands and writes every
// host-level value into the island's fields. Warnings name what the file
// still needs by hand (a GPU the catalog lacks).
func BuildClusterFile(probes []*HostProbe, o ClusterOptions) (*cluster.File, []string, error) {
	if len(probes) == 0 {
		return nil, nil, fmt.Errorf("no hosts probed")
	}
	for _, hp := range probes {
		if len(hp.GPUs) == 0 && o.NProcPerNode <= 0 {
			return nil, nil, fmt.Errorf("host %s has no GPUs: pass --nproc-per-node N to give each GPU-less host N process slots", hp.Target)
		}
	}
	groups := groupHosts(probes, o)
	f := &cluster.File{Measured: o.Measured, MeasuredCompute: o.MeasuredCompute}
	var warnings []string
	for i, g := range groups {
		is, w := islandSpec(fmt.Sprintf("cluster%d", i+1), g, o)
		f.Clusters = append(f.Clusters, is)
		warnings = append(warnings, w...)
	}
	return f, warnings, nil
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

func islandSpec(name string, hosts []*HostProbe, o ClusterOptions) (cluster.IslandSpec, []string) {
	h := hardwareOf(hosts[0])
	is := cluster.IslandSpec{
		Name:          name,
		GPUsPerHost:   h.gpuCount,
		NICs:          h.nicSpecs,
		HostMemoryGiB: math.Round(h.memGiBExact*10) / 10,
		CPUCores:      h.cpuCores,
		IntraHost:     cluster.IntraHostBus{Type: h.intraType},
	}
	var warnings []string
	if h.gpuCount == 0 {
		is.GPUsPerHost = o.NProcPerNode
		is.GPU = cpuSlotSpec(h.memGiBExact, o)
	} else {
		g := hosts[0].GPUs[0]
		var known bool
		if is.GPU, known = gpuSpec(g); !known {
			warnings = append(warnings, fmt.Sprintf("%s: GPU %q is not in the planner's catalog: add gpu.peak_bf16_tflops to the cluster file", name, g.Name))
		}
		is.PCIeGen = g.PCIeGenMax
	}
	for _, n := range is.NICs {
		if n.Type == cluster.NICEthernet && n.RateGbitPerS <= 0 {
			warnings = append(warnings, fmt.Sprintf("%s (%s): Ethernet %s reports no link speed (as virtual NICs do: sysfs speed -1), so the cluster file leaves its rate out and plans price the hosts' Ethernet at %g Gbit/s: set rate_gbit_per_s, or run probe --measure for measured bandwidth",
				name, hosts[0].Target, strings.Join(n.Netdevs, ","), float64(cluster.FallbackEthernetGbitPerS)))
		}
	}
	sw := hosts[0].Software
	for _, hp := range hosts[1:] {
		sw.NCCL = cluster.OldestVersion(sw.NCCL, hp.Software.NCCL)
		sw.Torch = cluster.OldestVersion(sw.Torch, hp.Software.Torch)
		sw.MegatronCore = cluster.OldestVersion(sw.MegatronCore, hp.Software.MegatronCore)
	}
	if sw != (cluster.SoftwareVersions{}) {
		is.Software = &sw
	}
	for _, hp := range hosts {
		e := o.entry(hp)
		if e.Address == "" && hp.Addr != "" && hp.Addr != e.Name {
			e.Address = hp.Addr
		}
		is.Hosts = append(is.Hosts, e)
	}
	return is, warnings
}

// cpuSlotSpec describes one process slot of a GPU-less host: its share of
// host memory and a nominal compute rate.
func cpuSlotSpec(hostMemGiB float64, o ClusterOptions) gpu.Spec {
	tflops := o.CPUSlotTFLOPS
	if tflops <= 0 {
		tflops = DefaultCPUSlotTFLOPS
	}
	perSlot := math.Floor(hostMemGiB/float64(o.NProcPerNode)*10) / 10
	return gpu.Spec{Model: CPUModel, MemoryGiB: perSlot, PeakTFLOPS: tflops}
}

// gpuSpec is the catalog entry for the GPU (TFLOP/s, memory bandwidth) with
// the memory nvidia-smi reports. An unknown model keeps nvidia-smi's name
// and memory; ok is false and the file needs peak_bf16_tflops by hand.
func gpuSpec(g GPU) (spec gpu.Spec, ok bool) {
	mem := math.Round(float64(g.MemoryMiB)/1024*10) / 10
	spec, ok = gpu.Lookup(g.Name)
	if !ok {
		return gpu.Spec{Model: g.Name, MemoryGiB: mem}, false
	}
	if g.MemoryMiB > 0 {
		spec.MemoryGiB = mem
	}
	return spec, true
}

// intraHostType reads the GPU-to-GPU bus from `nvidia-smi topo -m`: NVLink
// between every pair of 3+ GPUs is an NVSwitch system, NVLink between some
// pairs a direct NVLink mesh, none PCIe. Without a matrix it stays empty
// and the planner takes the catalog's usual server for the GPU.
func intraHostType(hp *HostProbe) string {
	t := hp.Topology
	if t == nil || len(hp.GPUs) < 2 {
		if len(hp.GPUs) < 2 {
			return "pcie"
		}
		return ""
	}
	var gpus []string
	for _, d := range t.Devices {
		if strings.HasPrefix(d, "GPU") {
			gpus = append(gpus, d)
		}
	}
	pairs, nv := 0, 0
	for i, a := range gpus {
		for _, b := range gpus[i+1:] {
			pairs++
			if strings.HasPrefix(t.Link[a][b], "NV") {
				nv++
			}
		}
	}
	switch {
	case nv == 0:
		return "pcie"
	case nv == pairs && len(gpus) > 2:
		return "nvswitch"
	default:
		return "nvlink"
	}
}

// SlowLinkFactor: inside a group of identical hosts, a host pair whose
// measured rate (the slower direction) is below 1/SlowLinkFactor of the
// group's fastest pair is a slow link, and hosts joined only by slow links
// go to separate islands. A factor this large keeps measurement noise
// (pairs sharing CPUs, a busy link) from splitting a real island.
const SlowLinkFactor = 4

// splitBySpeed splits a group of identical hosts into islands connected by
// fast measured links. Hosts missing from the matrix stay with the first
// island.
func splitBySpeed(group []*HostProbe, m *cluster.MeasuredBandwidth, nameOf func(*HostProbe) string) [][]*HostProbe {
	idx := map[string]int{}
	for i, h := range m.Hosts {
		idx[h] = i
	}
	rate := func(a, b *HostProbe) (float64, bool) {
		i, ok1 := idx[nameOf(a)]
		j, ok2 := idx[nameOf(b)]
		if !ok1 || !ok2 {
			return 0, false
		}
		return min(m.GbitPerS[i][j], m.GbitPerS[j][i]), true
	}
	best := 0.0
	for i := range group {
		for j := i + 1; j < len(group); j++ {
			if r, ok := rate(group[i], group[j]); ok {
				best = max(best, r)
			}
		}
	}
	parent := make([]int, len(group))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for i := range group {
		if _, measured := idx[nameOf(group[i])]; !measured {
			parent[find(i)] = find(0)
			continue
		}
		for j := i + 1; j < len(group); j++ {
			if r, ok := rate(group[i], group[j]); ok && r*SlowLinkFactor >= best {
				parent[find(j)] = find(i)
			}
		}
	}
	return groupInOrder(group, func(i int, _ *HostProbe) int { return find(i) })
}
