package cluster

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// NICType is the kind of a network interface as the planner sees it.
type NICType string

const (
	NICInfiniBand NICType = "infiniband"
	NICRoCE       NICType = "roce"
	NICEthernet   NICType = "ethernet"
)

// RDMA reports whether the NIC type can carry NCCL's IB transport.
func (t NICType) RDMA() bool { return t == NICInfiniBand || t == NICRoCE }

// File is the on-disk (YAML) cluster description that users write and
// `pipette-launch probe` produces. Units are part of every field name.
type File struct {
	// Clusters are islands of identical hosts that share a fabric.
	Clusters []IslandSpec `yaml:"clusters" json:"clusters"`
	// Links describe the connection between two islands; without one, islands
	// are assumed to reach each other over their Ethernet NICs only.
	Links []LinkSpec `yaml:"links,omitempty" json:"links,omitempty"`
	// Measured, when present, overrides nominal host-to-host figures.
	Measured *MeasuredBandwidth `yaml:"measured,omitempty" json:"measured,omitempty"`
	// MeasuredCompute (probe --measure) replaces catalog compute rates and
	// intra-host buses; Calibration (calibrate) corrects the model from
	// real runs. See measured_compute.go and calibration.go.
	MeasuredCompute *MeasuredCompute   `yaml:"measured_compute,omitempty" json:"measured_compute,omitempty"`
	Calibration     *calib.Calibration `yaml:"calibration,omitempty" json:"calibration,omitempty"`
}

// IslandSpec describes a group of identical hosts on one fabric.
type IslandSpec struct {
	Name string `yaml:"name" json:"name"`
	// Hosts lists the hosts: a hostlist expression ("node[01-16]") or a list
	// whose items are names or {name, address, user, port} maps.
	Hosts       HostEntries  `yaml:"hosts" json:"hosts"`
	GPUsPerHost int          `yaml:"gpus_per_host" json:"gpus_per_host"`
	GPU         gpu.Spec     `yaml:"gpu" json:"gpu"`
	IntraHost   IntraHostBus `yaml:"intra_host" json:"intra_host"`
	NICs        []NICSpec    `yaml:"nics" json:"nics"`
	// Fabric names the RDMA fabric the island's RDMA NICs sit on; islands
	// with the same non-empty fabric can use RDMA between them.
	Fabric        string  `yaml:"fabric,omitempty" json:"fabric,omitempty"`
	HostMemoryGiB float64 `yaml:"host_memory_gib" json:"host_memory_gib"`
	CPUCores      int     `yaml:"cpu_cores" json:"cpu_cores"`
	// Software is what the hosts run (probed, or written by the user): the
	// oldest version found on any of the island's hosts.
	Software *SoftwareVersions `yaml:"software,omitempty" json:"software,omitempty"`
	// PCIeGen is the GPU-to-host PCIe generation (3, 4, 5); 0 means unknown.
	PCIeGen int `yaml:"pcie_gen,omitempty" json:"pcie_gen,omitempty"`
	// HostMemoryBandwidthGBytesPerS is the host DRAM bandwidth (CPU Adam).
	HostMemoryBandwidthGBytesPerS float64 `yaml:"host_memory_bandwidth_gbyte_per_s,omitempty" json:"host_memory_bandwidth_gbyte_per_s,omitempty"`
}

// SoftwareVersions are the versions that decide whether communicators can
// pick their network one by one (NCCL >= 2.17.1 ncclConfig_t.netName, torch
// >= 2.1 ProcessGroupNCCL.Options().config.net_name, Megatron-Core >= 0.11
// net_name in --nccl-communicator-config-path). Empty means unknown.
type SoftwareVersions struct {
	NCCL         string `yaml:"nccl,omitempty" json:"nccl,omitempty"`
	Torch        string `yaml:"torch,omitempty" json:"torch,omitempty"`
	MegatronCore string `yaml:"megatron_core,omitempty" json:"megatron_core,omitempty"`
}

// HostEntry is one host of an island. Address is how other hosts and the
// launcher reach it (defaults to Name).
type HostEntry struct {
	Name    string `yaml:"name" json:"name"`
	Address string `yaml:"address,omitempty" json:"address,omitempty"`
	User    string `yaml:"user,omitempty" json:"user,omitempty"`
	Port    int    `yaml:"port,omitempty" json:"port,omitempty"`
}

// HostEntries is a list of hosts that also accepts a hostlist expression in
// YAML (see UnmarshalYAML in cluster_yaml.go).
type HostEntries []HostEntry

// IntraHostBus is how GPUs in one host talk to each other.
type IntraHostBus struct {
	// Type is nvlink, nvswitch or pcie.
	Type string `yaml:"type" json:"type"`
	// BandwidthGBytesPerS is the per-GPU unidirectional bus bandwidth.
	BandwidthGBytesPerS float64 `yaml:"bandwidth_gbyte_per_s,omitempty" json:"bandwidth_gbyte_per_s,omitempty"`
}

// NICSpec describes the NICs of one type on each host of an island.
type NICSpec struct {
	Type  NICType `yaml:"type" json:"type"`
	Count int     `yaml:"count" json:"count"`
	// RateGbitPerS is one port's rate. An Ethernet entry may leave it out
	// (0) when the interface reports none, as virtual NICs do (sysfs speed
	// -1): plans then price the host's Ethernet at the 10 Gbit/s fallback
	// (ethernetBytesPerS) unless measured bandwidth says otherwise.
	RateGbitPerS float64 `yaml:"rate_gbit_per_s,omitempty" json:"rate_gbit_per_s,omitempty"`
	// Devices are RDMA device names with port (mlx5_0:1), for NCCL_IB_HCA.
	Devices []string `yaml:"devices,omitempty" json:"devices,omitempty"`
	// Netdevs are the network interfaces (eth0, ib0), for NCCL_SOCKET_IFNAME.
	Netdevs []string `yaml:"netdevs,omitempty" json:"netdevs,omitempty"`
	// GIDIndex is the RoCE GID index when known.
	GIDIndex *int `yaml:"roce_gid_index,omitempty" json:"roce_gid_index,omitempty"`
	// LatencyMicroseconds: host-to-host per-message latency over these NICs
	// (0: the kind's default); milliseconds over TCP in a cloud, paid by
	// every step of a ring collective.
	LatencyMicroseconds float64 `yaml:"latency_us,omitempty" json:"latency_us,omitempty"`
	// Senders: what fewer GPUs sending at once reach over these NICs
	// together (RateGbitPerS x Count is what all the host's GPUs reach);
	// senders.go.
	Senders []SenderRate `yaml:"senders,omitempty" json:"senders,omitempty"`
}

// RateText is the port rate as the summaries print it: "N Gbit/s", or
// "rate unknown" for an Ethernet port that reports none.
func (n NICSpec) RateText() string {
	if n.RateGbitPerS <= 0 {
		return "rate unknown"
	}
	return fmt.Sprintf("%g Gbit/s", n.RateGbitPerS)
}

// LinkSpec is the connection between two islands.
type LinkSpec struct {
	Between             [2]string `yaml:"between" json:"between"`
	Type                NICType   `yaml:"type" json:"type"`
	BandwidthGbitPerS   float64   `yaml:"bandwidth_gbit_per_s" json:"bandwidth_gbit_per_s"`
	LatencyMicroseconds float64   `yaml:"latency_us,omitempty" json:"latency_us,omitempty"`
	// Senders: what fewer GPUs of a host sending at once reach over the
	// link (BandwidthGbitPerS is what all of them reach); senders.go.
	Senders []SenderRate `yaml:"senders,omitempty" json:"senders,omitempty"`
}

// MeasuredBandwidth is a host-to-host attained bandwidth matrix.
type MeasuredBandwidth struct {
	MeasuredAt time.Time `yaml:"measured_at" json:"measured_at"`
	Tool       string    `yaml:"tool,omitempty" json:"tool,omitempty"`
	Hosts      []string  `yaml:"hosts" json:"hosts"`
	// GbitPerS[i][j] is the attained rate from Hosts[i] to Hosts[j].
	GbitPerS [][]float64 `yaml:"gbit_per_s" json:"gbit_per_s"`
}

// Cluster is the resolved form the planner computes on: every host expanded,
// every GPU filled from the catalog, every host pair given a link.
type Cluster struct {
	Islands []Island
	Hosts   []Host
	// bw[i][j] bytes/s and lat[i][j] seconds between distinct hosts i and j
	// when the cluster was built from full matrices (NewCluster); nil for a
	// resolved cluster file, whose links live in compact.
	bw  [][]float64
	lat [][]float64
	// compact holds a resolved file's links in O(islands^2 + measured^2)
	// instead of two n x n float64 matrices (1 GiB at 8,192 hosts).
	compact *compactLinks
	// intraLat, when set, is each host's internal latency (hosts merged
	// for cross-host TP talk over the NIC inside); else intraHostLatencyS.
	intraLat []float64
	// pipe, when set, prices pipeline send/recv and the embedding group's
	// all-reduce (TransportIslands: those communicators run over TCP
	// sockets, also between hosts of one island).
	pipe *compactLinks
	// fastest caches fastestLink, which every priced config asks for
	// (BestLink): over a full matrix it is an n^2 scan (issue 23: a third
	// of BenchmarkPlan1024GPUs). nil (a Cluster literal) scans each time.
	fastest *lazyLink
	// classes caches HostClasses, which every priced config asks for (a
	// scan of every host). nil (a Cluster literal) scans each time.
	classes *lazyClasses
}

// lazyClasses is HostClasses computed once, on first use.
type lazyClasses struct {
	once     sync.Once
	of, reps []int
}

// HostClasses partitions the hosts by GPU and intra-host link, all a
// stage's own time depends on: of[h] is host h's class, reps[k] the first
// host of class k, classes numbered in the order they first appear. The
// slices are shared: read them, never write.
func (c *Cluster) HostClasses() (of, reps []int) {
	if c.classes == nil {
		return c.scanHostClasses()
	}
	c.classes.once.Do(func() { c.classes.of, c.classes.reps = c.scanHostClasses() })
	return c.classes.of, c.classes.reps
}

func (c *Cluster) scanHostClasses() (of, reps []int) {
	of = make([]int, len(c.Hosts))
	type class struct {
		gpu   gpu.Spec
		intra Link
	}
	var seen []class
	for h, host := range c.Hosts {
		cl := class{host.GPU, c.LinkBetween(h, h)}
		k := slices.Index(seen, cl)
		if k < 0 {
			seen, reps = append(seen, cl), append(reps, h)
			k = len(seen) - 1
		}
		of[h] = k
	}
	return of, reps
}

// lazyLink is a link computed once, on first use, by whichever goroutine
// asks first.
type lazyLink struct {
	once sync.Once
	l    Link
}

// compactLinks: every pair of distinct hosts gets its islands' nominal link
// unless the measured matrix has a figure for it, which replaces the
// bandwidth. Measured rates are stored as 16-bit codes into a table of the
// distinct rates (exact while there are at most 65,535 of them; iperf
// figures repeat), else as float32 (7 significant digits).
type compactLinks struct {
	island  []int32 // per host: Host.Island, dense for cache-friendly lookups
	islands int
	nominal []Link  // islands*islands, by Host.Island
	mrow    []int32 // host -> row of the measured matrix, -1 if unmeasured
	mn      int
	codes   []uint16  // mn*mn; 0 = not measured, else palette[code-1]
	palette []float64 // bytes/s
	f32     []float32 // mn*mn bytes/s (0 = not measured) when codes is nil
	// measuredDiv, when set, divides measured rates per island pair (a
	// calibration's link factors).
	measuredDiv []float64
	// shares, when set, is each island pair's senders table (SenderShare).
	shares [][]float64
}

// measured returns the measured rate from host a to host b, or 0.
func (l *compactLinks) measured(a, b int) float64 {
	if l.mn == 0 {
		return 0
	}
	ra, rb := l.mrow[a], l.mrow[b]
	if ra < 0 || rb < 0 {
		return 0
	}
	i := int(ra)*l.mn + int(rb)
	if l.codes != nil {
		if c := l.codes[i]; c > 0 {
			return l.palette[c-1]
		}
		return 0
	}
	return float64(l.f32[i])
}

// setMeasured stores rows (bytes/s, 0 = not measured) for the hosts in
// hostRow order; rows may alias.
func (l *compactLinks) setMeasured(n int, hostRow []int32, mn int, at func(i, j int) float64) {
	l.mrow, l.mn = hostRow, mn
	if mn == 0 {
		return
	}
	index := map[float64]uint16{}
	codes := make([]uint16, mn*mn)
	for i := 0; i < mn && codes != nil; i++ {
		for j := 0; j < mn; j++ {
			v := at(i, j)
			if v <= 0 {
				continue
			}
			c, ok := index[v]
			if !ok {
				if len(l.palette) == math.MaxUint16 {
					codes = nil // too many distinct rates: float32 instead
					break
				}
				l.palette = append(l.palette, v)
				c = uint16(len(l.palette))
				index[v] = c
			}
			codes[i*mn+j] = c
		}
	}
	if codes != nil {
		l.codes = codes
		return
	}
	l.palette = nil
	l.f32 = make([]float32, mn*mn)
	for i := 0; i < mn; i++ {
		for j := 0; j < mn; j++ {
			l.f32[i*mn+j] = float32(at(i, j))
		}
	}
}

// fastestLink is the highest bandwidth and lowest latency of any link
// between distinct hosts (the optimistic link of unplaced blocks),
// computed on first use and kept (see Matrices).
func (c *Cluster) fastestLink() Link {
	if c.fastest == nil {
		return c.scanFastestLink()
	}
	c.fastest.once.Do(func() { c.fastest.l = c.scanFastestLink() })
	return c.fastest.l
}

func (c *Cluster) scanFastestLink() Link {
	var best Link
	c.eachDistinctLink(func(l Link) {
		best.BytesPerS = max(best.BytesPerS, l.BytesPerS)
		if best.LatencyS == 0 || l.LatencyS < best.LatencyS {
			best.LatencyS = l.LatencyS
		}
	})
	return best
}

// eachDistinctLink calls f with every link between distinct hosts, or
// with at least every distinct value such a link takes (compact form).
func (c *Cluster) eachDistinctLink(f func(Link)) {
	n := len(c.Hosts)
	if c.compact == nil {
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if a != b {
					f(c.LinkBetween(a, b))
				}
			}
		}
		return
	}
	l := c.compact
	count := make([]int, l.islands)
	for _, h := range c.Hosts {
		count[h.Island]++
	}
	for a := 0; a < l.islands; a++ {
		for b := 0; b < l.islands; b++ {
			if count[a] > 0 && count[b] > 0 && (a != b || count[a] > 1) {
				f(l.nominal[a*l.islands+b])
			}
		}
	}
	if l.mn == 0 {
		return
	}
	// A measured rate keeps its pair's nominal latency.
	for a := 0; a < n; a++ {
		if l.mrow[a] < 0 {
			continue
		}
		for b := 0; b < n; b++ {
			if a != b && l.measured(a, b) > 0 {
				f(c.LinkBetween(a, b))
			}
		}
	}
}

// Island is a resolved IslandSpec.
type Island struct {
	Spec  IslandSpec
	Hosts []int // indices into Cluster.Hosts
	// RDMA reports whether the island has an RDMA NIC.
	RDMA bool
}

// Host is one resolved host.
type Host struct {
	HostEntry
	Island int
	GPUs   int
	GPU    gpu.Spec // resolved from the catalog
	// IntraBytesPerS is GPU-to-GPU bandwidth inside the host.
	IntraBytesPerS float64
	// NICBytesPerS is the host's aggregate inter-host bandwidth.
	NICBytesPerS float64
	// MemoryBytes is host DRAM; PCIeBytesPerS is one GPU's host link.
	MemoryBytes   float64
	PCIeBytesPerS float64
	CPUCores      int
	// HostMemBytesPerS is host DRAM bandwidth (drives CPU Adam time).
	HostMemBytesPerS float64
}

// Link is the bandwidth and latency of a path between two GPUs' hosts.
type Link struct {
	BytesPerS float64
	LatencyS  float64
}

// LinkBetween returns the link from host a to host b; a == b is the
// intra-host bus.
func (c *Cluster) LinkBetween(a, b int) Link {
	if a == b {
		lat := intraHostLatencyS
		if c.intraLat != nil {
			lat = c.intraLat[a]
		}
		return Link{BytesPerS: c.Hosts[a].IntraBytesPerS, LatencyS: lat}
	}
	if c.compact == nil {
		return Link{BytesPerS: c.bw[a][b], LatencyS: c.lat[a][b]}
	}
	l := c.compact
	pair := int(l.island[a])*l.islands + int(l.island[b])
	link := l.nominal[pair]
	if v := l.measured(a, b); v > 0 {
		link.BytesPerS = v
		if l.measuredDiv != nil {
			link.BytesPerS /= l.measuredDiv[pair]
		}
	}
	return link
}

// SeparatePipelineLinks reports whether pipeline send/recv runs on other
// links than TP and DP (TransportIslands across islands).
func (c *Cluster) SeparatePipelineLinks() bool { return c.pipe != nil }

// Matrices returns the full host-to-host bandwidth (bytes/s) and latency (s)
// matrices of a cluster built by NewCluster (nil for one resolved from a
// file, which stores links compactly). Tests perturb links through them,
// before the cluster is first priced (its fastest link is kept from then).
func (c *Cluster) Matrices() (bw, lat [][]float64) { return c.bw, c.lat }

// SetIntraHostLatency gives each host an internal latency of its own: the
// search's merged hosts stand for several real ones, whose slowest link
// between members that is.
func (c *Cluster) SetIntraHostLatency(lat []float64) {
	c.intraLat = lat
	if c.classes != nil {
		c.classes = &lazyClasses{} // the intra links changed
	}
}

// PipelineLinkBetween is the link pipeline send/recv and the embedding
// group use between hosts a and b: LinkBetween, except under
// TransportIslands, where those groups run over TCP sockets.
func (c *Cluster) PipelineLinkBetween(a, b int) Link {
	if c.pipe == nil || a == b {
		return c.LinkBetween(a, b)
	}
	pair := int(c.pipe.island[a])*c.pipe.islands + int(c.pipe.island[b])
	link := c.pipe.nominal[pair]
	if v := c.pipe.measured(a, b); v > 0 {
		link.BytesPerS = v
		if c.pipe.measuredDiv != nil {
			link.BytesPerS /= c.pipe.measuredDiv[pair]
		}
	}
	return link
}

// TotalGPUs is the number of GPUs in the cluster.
func (c *Cluster) TotalGPUs() int {
	n := 0
	for _, h := range c.Hosts {
		n += h.GPUs
	}
	return n
}

const intraHostLatencyS = 5e-6

// BestLink is the fastest link any GPU of a TP group can see: the best
// intra-host bus or the best inter-host link shared by tp GPUs, with the
// lowest latency of either.
func BestLink(c *Cluster, tp int) Link {
	best := c.fastestLink()
	best.BytesPerS /= float64(max(tp, 1))
	if len(c.Hosts) < 2 {
		best = Link{}
	}
	_, reps := c.HostClasses() // every host's intra link is its class's
	for _, h := range reps {
		l := c.LinkBetween(h, h)
		best.BytesPerS = max(best.BytesPerS, l.BytesPerS)
		if best.LatencyS == 0 || l.LatencyS < best.LatencyS {
			best.LatencyS = l.LatencyS
		}
	}
	return best
}

// NewCluster builds a resolved cluster from hosts and a full host-to-host
// bandwidth (bytes/s) and latency (s) matrix. Islands are derived from
// Host.Island. It is how tests and the YAML resolver construct clusters.
func NewCluster(islands []Island, hosts []Host, bwBytesPerS, latencyS [][]float64) *Cluster {
	return &Cluster{Islands: islands, Hosts: hosts, bw: bwBytesPerS, lat: latencyS, fastest: &lazyLink{}, classes: &lazyClasses{}}
}
