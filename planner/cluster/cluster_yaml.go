package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"gopkg.in/yaml.v3"
)

// Parse parses and validates a cluster YAML document. Unknown
// keys, non-integers in integer fields and quoted booleans are errors (a
// typo must not silently drop or change a setting); every error names the
// field path and, where the file has it, its line and column, e.g.
// `clusters[1].gpus_per_host (line 7, column 20): must be > 0`.
func Parse(data []byte) (*File, error) {
	var f File
	pos, err := yamlcheck.Decode(data, &f, hostsCheck())
	if errors.Is(err, yamlcheck.ErrEmpty) {
		return nil, errors.New("cluster file: empty document; it needs a `clusters:` list")
	}
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	errs := f.validate()
	errs.Locate(pos)
	if err := errs.Err("cluster file"); err != nil {
		return nil, err
	}
	return &f, nil
}

// Marshal writes f as YAML that Parse reads back unchanged.
func (f *File) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("marshal cluster file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("marshal cluster file: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalYAML accepts a hostlist expression ("node[01-16]"), a list of
// strings (each may be an expression) or a list of {name, address, user,
// port} maps, in any mix.
func (h *HostEntries) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return h.appendExpr(n)
	case yaml.SequenceNode:
		for _, item := range n.Content {
			if err := h.appendItem(item); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("line %d: hosts must be a hostlist expression or a list", n.Line)
}

func (h *HostEntries) appendItem(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		return h.appendExpr(n)
	case yaml.MappingNode:
		if err := checkHostKeys(n); err != nil {
			return err
		}
		var e HostEntry
		if err := n.Decode(&e); err != nil {
			return fmt.Errorf("line %d: host: %w", n.Line, err)
		}
		*h = append(*h, e)
		return nil
	}
	return fmt.Errorf("line %d: a host must be a name or a {name, address, user, port} map", n.Line)
}

// checkHostKeys rejects unknown keys in a host map: Node.Decode does not
// apply the decoder's KnownFields setting.
func checkHostKeys(n *yaml.Node) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i].Value; k {
		case "name", "address", "user", "port":
		default:
			return fmt.Errorf("line %d: host: unknown field %q (want name, address, user, port)", n.Content[i].Line, k)
		}
	}
	return nil
}

func (h *HostEntries) appendExpr(n *yaml.Node) error {
	names, err := hostlist.Expand(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: hosts %q: %w", n.Line, n.Value, err)
	}
	for _, name := range names {
		t, err := hostname.ParseTarget(name)
		if err != nil {
			return fmt.Errorf("line %d: hosts: %w", n.Line, err)
		}
		*h = append(*h, HostEntry{Name: t.Host, User: t.User, Port: t.Port})
	}
	return nil
}

// MarshalYAML writes plain names as strings and richer entries as maps.
func (h HostEntries) MarshalYAML() (any, error) {
	out := make([]any, len(h))
	for i, e := range h {
		if e.Address == "" && e.User == "" && e.Port == 0 {
			out[i] = e.Name
		} else {
			out[i] = e
		}
	}
	return out, nil
}

// Validate checks every field and returns all problems, each naming its path.
func (f *File) Validate() error { return f.validate().Err("cluster file") }

func (f *File) validate() yamlcheck.Problems {
	var errs yamlcheck.Problems
	if len(f.Clusters) == 0 {
		errs.Add("clusters", "at least one cluster is required")
	}
	totalHosts := 0
	for _, c := range f.Clusters {
		totalHosts += len(c.Hosts)
	}
	if totalHosts > limits.MaxHosts {
		errs.Add("clusters", "%d hosts in all; at most %d (the limit of one job)", totalHosts, limits.MaxHosts)
		return errs
	}
	names := map[string]int{}
	hosts := map[string]string{}
	folded := map[string]hostAt{}
	for i, c := range f.Clusters {
		p := fmt.Sprintf("clusters[%d]", i)
		if c.Name == "" {
			errs.Add(p+".name", "required (links refer to clusters by name)")
		} else if j, dup := names[c.Name]; dup {
			errs.Add(p+".name", "duplicate name %q (also clusters[%d])", c.Name, j)
		} else {
			names[c.Name] = i
		}
		validateHosts(&errs, p, c.Hosts, hosts, folded)
		validateIsland(&errs, p, c, totalHosts)
	}
	for i, l := range f.Links {
		validateLink(&errs, fmt.Sprintf("links[%d]", i), l, names)
	}
	validateDuplicateLinks(&errs, f.Links)
	if f.Measured != nil {
		validateMeasured(&errs, f.Measured, hosts)
	}
	if f.MeasuredCompute != nil {
		validateMeasuredCompute(&errs, f.MeasuredCompute, hosts)
	}
	if f.Calibration != nil {
		calib.Validate(&errs, f.Calibration, names)
	}
	return errs
}

// hostAt is a host name as written and its field path.
type hostAt struct{ name, path string }

// validateHosts checks one island's hosts; seen maps each name to its path
// (for the measured sections), folded each name's hostname.Key.
func validateHosts(errs *yamlcheck.Problems, p string, hs HostEntries, seen map[string]string, folded map[string]hostAt) {
	if len(hs) == 0 {
		errs.Add(p+".hosts", "at least one host is required")
	}
	for j, h := range hs {
		hp := fmt.Sprintf("%s.hosts[%d]", p, j)
		if h.Name == "" {
			errs.Add(hp+".name", "required")
			continue
		}
		if err := hostname.Check(h.Name); err != nil {
			errs.Add(hp+".name", "%q: %v", h.Name, err)
			continue
		}
		if h.Address != "" {
			if err := hostname.Check(h.Address); err != nil {
				errs.Add(hp+".address", "%q: %v", h.Address, err)
			}
		}
		if h.User != "" {
			if err := hostname.CheckUser(h.User); err != nil {
				errs.Add(hp+".user", "%v", err)
			}
		}
		// Host names are case-insensitive (RFC 4343): n1 and N1 are one
		// host, which two entries would count twice.
		if prev, dup := folded[hostname.Key(h.Name)]; dup {
			if prev.name == h.Name {
				errs.Add(hp, "duplicate host %q (also %s)", h.Name, prev.path)
			} else {
				errs.Add(hp, "duplicate host %q (also %s, as %q: host names are case-insensitive); list each host once", h.Name, prev.path, prev.name)
			}
		}
		folded[hostname.Key(h.Name)] = hostAt{h.Name, hp}
		seen[h.Name] = hp
		if h.Port < 0 || h.Port > 65535 {
			errs.Add(hp+".port", "must be 1..65535 (0 or unset: ssh's default), got %d", h.Port)
		}
	}
}

func validateIsland(errs *yamlcheck.Problems, p string, c IslandSpec, totalHosts int) {
	if c.GPUsPerHost <= 0 || c.GPUsPerHost > limits.MaxGPUsPerHost {
		errs.Add(p+".gpus_per_host", "must be 1..%d, got %d", limits.MaxGPUsPerHost, c.GPUsPerHost)
	}
	validateGPU(errs, p+".gpu", c.GPU)
	switch c.IntraHost.Type {
	case "", "nvlink", "nvswitch", "pcie":
	default:
		errs.Add(p+".intra_host.type", "must be nvlink, nvswitch or pcie, got %q", c.IntraHost.Type)
	}
	errs.CheckOptional(p+".intra_host.bandwidth_gbyte_per_s", limits.BusGBytePerS, c.IntraHost.BandwidthGBytesPerS)
	if len(c.NICs) == 0 && totalHosts > 1 {
		errs.Add(p+".nics", "at least one NIC is required when the cluster has more than one host")
	}
	for k, n := range c.NICs {
		validateNIC(errs, fmt.Sprintf("%s.nics[%d]", p, k), n)
	}
	errs.CheckOptional(p+".host_memory_gib", limits.MemoryGiB, c.HostMemoryGiB)
	if c.CPUCores < 0 {
		errs.Add(p+".cpu_cores", "must be >= 0, got %d", c.CPUCores)
	}
	switch c.PCIeGen {
	case 0, 3, 4, 5, 6:
	default:
		errs.Add(p+".pcie_gen", "must be 3, 4, 5 or 6 (0 = unknown), got %d", c.PCIeGen)
	}
	errs.CheckOptional(p+".host_memory_bandwidth_gbyte_per_s", limits.BusGBytePerS, c.HostMemoryBandwidthGBytesPerS)
}

func validateGPU(errs *yamlcheck.Problems, p string, g gpu.Spec) {
	if g.Model == "" {
		errs.Add(p+".model", "required (e.g. H100-SXM, A100-80GB-SXM, L40S)")
		return
	}
	errs.CheckOptional(p+".memory_gib", limits.MemoryGiB, g.MemoryGiB)
	errs.CheckOptional(p+".peak_bf16_tflops", limits.TFLOPS, g.PeakTFLOPS)
	errs.CheckOptional(p+".peak_fp8_tflops", limits.TFLOPS, g.PeakFP8TFLOPS)
	errs.CheckOptional(p+".peak_fp32_tflops", limits.TFLOPS, g.PeakFP32TFLOPS)
	errs.CheckOptional(p+".memory_bandwidth_tbyte_per_s", limits.HBMTBytePerS, g.MemoryBandwidthTBPerS)
	if _, known := gpu.Lookup(g.Model); known {
		return
	}
	// A GPU the catalog lacks needs its own figures; a figure given but
	// out of range is reported above, not as an unknown GPU.
	var missing []string
	if g.MemoryGiB == 0 {
		missing = append(missing, "memory_gib")
	}
	if g.PeakTFLOPS == 0 {
		missing = append(missing, "peak_bf16_tflops")
	}
	if len(missing) == 0 {
		return
	}
	if s := gpu.Suggest(g.Model); s != "" {
		errs.Add(p+".model", "unknown GPU %q: did you mean %s? (or give %s for a GPU of your own)", g.Model, s, strings.Join(missing, " and "))
	} else {
		errs.Add(p+".model", "unknown GPU %q: the catalog has %s; for a GPU of your own give %s", g.Model, strings.Join(gpu.Names(), ", "), strings.Join(missing, " and "))
	}
}

func validateNIC(errs *yamlcheck.Problems, p string, n NICSpec) {
	if !validNICType(n.Type) {
		errs.Add(p+".type", "must be infiniband, roce or ethernet, got %q", n.Type)
	}
	if n.Count <= 0 || n.Count > limits.MaxGPUsPerHost {
		errs.Add(p+".count", "must be 1..%d, got %d", limits.MaxGPUsPerHost, n.Count)
	}
	if n.Type == NICEthernet {
		errs.CheckOptional(p+".rate_gbit_per_s", limits.LinkGbitPerS, n.RateGbitPerS) // unknown: see NICSpec
	} else {
		errs.Check(p+".rate_gbit_per_s", limits.LinkGbitPerS, n.RateGbitPerS)
	}
	errs.CheckOptional(p+".latency_us", limits.LatencyMicroseconds, n.LatencyMicroseconds)
	validateSenders(errs, p, n.Senders, float64(n.Count)*n.RateGbitPerS)
}

func validNICType(t NICType) bool {
	return t == NICInfiniBand || t == NICRoCE || t == NICEthernet
}

// required and optional record a number at path p outside its range
// (internal/limits); for optional, 0 means "not given".
func validateLink(errs *yamlcheck.Problems, p string, l LinkSpec, names map[string]int) {
	for k, n := range l.Between {
		if _, ok := names[n]; !ok {
			errs.Add(fmt.Sprintf("%s.between[%d]", p, k), "unknown cluster %q", n)
		}
	}
	if l.Between[0] == l.Between[1] && l.Between[0] != "" {
		errs.Add(p+".between", "a link joins two different clusters, got %q twice", l.Between[0])
	}
	if !validNICType(l.Type) {
		errs.Add(p+".type", "must be infiniband, roce or ethernet, got %q", l.Type)
	}
	errs.Check(p+".bandwidth_gbit_per_s", limits.LinkGbitPerS, l.BandwidthGbitPerS)
	errs.CheckOptional(p+".latency_us", limits.LatencyMicroseconds, l.LatencyMicroseconds)
	validateSenders(errs, p, l.Senders, l.BandwidthGbitPerS)
}

func validateDuplicateLinks(errs *yamlcheck.Problems, links []LinkSpec) {
	seen := map[[2]string]int{}
	for i, l := range links {
		k := linkKey(l.Between[0], l.Between[1])
		if j, dup := seen[k]; dup {
			errs.Add(fmt.Sprintf("links[%d]", i), "duplicate link between %q and %q (also links[%d])", k[0], k[1], j)
		}
		seen[k] = i
	}
}

func linkKey(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

func validateMeasured(errs *yamlcheck.Problems, m *MeasuredBandwidth, hosts map[string]string) {
	for i, h := range m.Hosts {
		if _, ok := hosts[h]; !ok {
			errs.Add(fmt.Sprintf("measured.hosts[%d]", i), "unknown host %q", h)
		}
	}
	if len(m.GbitPerS) != len(m.Hosts) {
		errs.Add("measured.gbit_per_s", "needs %d rows (one per measured host), got %d", len(m.Hosts), len(m.GbitPerS))
	}
	for i, row := range m.GbitPerS {
		if len(row) != len(m.Hosts) {
			errs.Add(fmt.Sprintf("measured.gbit_per_s[%d]", i), "needs %d columns, got %d", len(m.Hosts), len(row))
		}
		for j, v := range row {
			errs.CheckOptional(fmt.Sprintf("measured.gbit_per_s[%d][%d]", i, j), limits.LinkGbitPerS, v)
		}
	}
}

// Nominal figures used where the file says nothing. Latencies are one-way
// small-message times NCCL sees: RDMA verbs ~2 us, kernel TCP sockets
// ~20 us (10-30 us on typical data-centre Ethernet).
const (
	rdmaLatencyS     = 2e-6
	ethernetLatencyS = 20e-6
	// FallbackEthernetGbitPerS is assumed for the Ethernet side of a host
	// that lists only InfiniBand NICs, or Ethernet ones of unknown rate:
	// such hosts almost always have a management/storage Ethernet port,
	// 10 Gbit/s being the common floor.
	FallbackEthernetGbitPerS = 10
	// defaultHostMemBytesPerS is attained (STREAM-like) host DRAM bandwidth
	// when the file does not give it: a dual-socket DDR4 server reaches
	// 150-300 GB/s, a desktop 50-80; 100 GB/s errs on the slow side.
	defaultHostMemBytesPerS = 100e9
	// defaultCPUCoresPerGPU is assumed when cpu_cores is missing.
	defaultCPUCoresPerGPU = 8
)

// PCIeEffectiveBytesPerS is the attained host<->GPU copy rate of an x16 link
// (about 80% of the raw 16/32/64/128 GB/s of gen 3/4/5/6).
func PCIeEffectiveBytesPerS(gen int) float64 {
	switch gen {
	case 3:
		return 12e9
	case 5:
		return 50e9
	case 6:
		return 100e9
	}
	return 25e9
}

// Resolve expands host lists, fills GPUs from the catalog and computes every
// host pair's link. For a pair of distinct hosts the first rule that applies
// wins: (1) the measured matrix, when it has a non-zero figure for the pair;
// (2) same island: the smaller of the two hosts' NIC aggregates (RDMA NICs
// when the island has them, else its Ethernet NICs); (3) an inter-island
// `links` entry (capped by both hosts' NICs of that type); (4) both islands
// RDMA on the same non-empty `fabric`: RDMA at the smaller aggregate; (5)
// Ethernet: the smaller of the two hosts' Ethernet rates (RoCE NICs count as
// Ethernet for TCP; a host with only InfiniBand is assumed to have a
// 10 Gbit/s Ethernet port).
func (f *File) Resolve() (*Cluster, error) { return f.ResolveFor(fabric.TransportAuto) }

// ResolveFor resolves the cluster with the links priced for transport t.
func (f *File) ResolveFor(t fabric.Transport) (*Cluster, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var islands []Island
	var hosts []Host
	for i, spec := range f.Clusters {
		isl, hs, err := resolveIsland(i, spec, len(hosts))
		if err != nil {
			return nil, err
		}
		islands = append(islands, isl)
		hosts = append(hosts, hs...)
	}
	if socketsOnly(t, islands) {
		for i := range hosts {
			hosts[i].NICBytesPerS = ethernetBytesPerS(islands[hosts[i].Island].Spec.NICs)
		}
	}
	f.applyMeasuredCompute(islands, hosts)
	var pipe *compactLinks
	if t == fabric.TransportIslands && socketsOnly(fabric.TransportAuto, islands) {
		// The pipeline's links as sockets see them; the hosts' copy only
		// carries Ethernet NIC rates (and takes calibration's changes).
		sh := slices.Clone(hosts)
		for i := range sh {
			sh[i].NICBytesPerS = ethernetBytesPerS(islands[sh[i].Island].Spec.NICs)
		}
		pipe = f.compactLinks(islands, sh, true)
		f.applyCalibration(islands, sh, pipe)
	}
	links := f.compactLinks(islands, hosts, socketsOnly(t, islands))
	links.shares = f.shareTable(islands) // SenderShare reads them here only
	f.applyCalibration(islands, hosts, links)
	c := &Cluster{Islands: islands, Hosts: hosts, compact: links, pipe: pipe, fastest: &lazyLink{}, classes: &lazyClasses{}}
	c.fastestLink() // computed once, before any planner goroutine reads it
	return c, nil
}

// socketsOnly reports whether every rank will use TCP sockets under t: the
// rule templates apply when rendering NCCL settings (fabric.SocketsOnly).
func socketsOnly(t fabric.Transport, islands []Island) bool {
	return fabric.SocketsOnly(t, fabricIslands(islands))
}

func fabricIslands(islands []Island) []fabric.Island {
	out := make([]fabric.Island, len(islands))
	for i, is := range islands {
		out[i] = fabric.Island{RDMA: is.RDMA, Fabric: is.Spec.Fabric}
	}
	return out
}

// FabricIslands are the transport decision's view of the given islands.
func (c *Cluster) FabricIslands(islands []int) []fabric.Island {
	out := make([]fabric.Island, len(islands))
	for i, isl := range islands {
		is := c.Islands[isl]
		out[i] = fabric.Island{RDMA: is.RDMA, Fabric: is.Spec.Fabric}
	}
	return out
}

func resolveIsland(i int, spec IslandSpec, firstHost int) (Island, []Host, error) {
	g, entry, _ := gpu.Resolve(spec.GPU)
	intra, err := intraBytesPerS(spec, entry)
	if err != nil {
		return Island{}, nil, fmt.Errorf("clusters[%d].intra_host: %w", i, err)
	}
	isl := Island{Spec: spec, RDMA: hasRDMA(spec.NICs)}
	var hosts []Host
	for k, e := range spec.Hosts {
		if e.Address == "" {
			e.Address = e.Name
		}
		hosts = append(hosts, Host{
			HostEntry:        e,
			Island:           i,
			GPUs:             spec.GPUsPerHost,
			GPU:              g,
			IntraBytesPerS:   intra,
			NICBytesPerS:     ncclNICBytesPerS(spec.NICs),
			MemoryBytes:      spec.HostMemoryGiB * gpu.GiB,
			PCIeBytesPerS:    PCIeEffectiveBytesPerS(pcieGen(spec, entry)),
			CPUCores:         cpuCores(spec),
			HostMemBytesPerS: hostMemBytesPerS(spec),
		})
		isl.Hosts = append(isl.Hosts, firstHost+k)
	}
	return isl, hosts, nil
}

func pcieGen(spec IslandSpec, e gpu.CatalogEntry) int {
	if spec.PCIeGen > 0 {
		return spec.PCIeGen
	}
	return e.PCIeGen
}

func cpuCores(spec IslandSpec) int {
	if spec.CPUCores > 0 {
		return spec.CPUCores
	}
	return defaultCPUCoresPerGPU * spec.GPUsPerHost
}

func hostMemBytesPerS(spec IslandSpec) float64 {
	if spec.HostMemoryBandwidthGBytesPerS > 0 {
		return spec.HostMemoryBandwidthGBytesPerS * 1e9
	}
	return defaultHostMemBytesPerS
}

// intraBytesPerS is the per-GPU GPU-to-GPU bandwidth inside a host: the
// explicit figure, else the catalog's NVLink/NVSwitch figure, else PCIe.
func intraBytesPerS(spec IslandSpec, e gpu.CatalogEntry) (float64, error) {
	if spec.IntraHost.BandwidthGBytesPerS > 0 {
		return spec.IntraHost.BandwidthGBytesPerS * 1e9, nil
	}
	typ := spec.IntraHost.Type
	if typ == "" {
		typ = e.IntraType
	}
	switch typ {
	case "nvlink", "nvswitch":
		if e.IntraGBps == 0 {
			return 0, fmt.Errorf("type %s for %q: give bandwidth_gbyte_per_s (the catalog has no NVLink figure for it)", typ, spec.GPU.Model)
		}
		return e.IntraGBps * 1e9, nil
	}
	return PCIeEffectiveBytesPerS(pcieGen(spec, e)), nil
}

func hasRDMA(nics []NICSpec) bool {
	for _, n := range nics {
		if n.Type.RDMA() {
			return true
		}
	}
	return false
}

// ncclNICBytesPerS is the aggregate NCCL uses between hosts of one island:
// all RDMA NICs when there are any (NCCL then ignores sockets), else all
// Ethernet NICs.
func ncclNICBytesPerS(nics []NICSpec) float64 {
	rdma := hasRDMA(nics)
	sum := 0.0
	for _, n := range nics {
		if n.Type.RDMA() == rdma {
			sum += float64(n.Count) * portGbitPerS(n)
		}
	}
	return sum * 1e9 / 8
}

// nicBytesPerS sums the NICs of one type.
func nicBytesPerS(nics []NICSpec, t NICType) float64 {
	sum := 0.0
	for _, n := range nics {
		if n.Type == t {
			sum += float64(n.Count) * portGbitPerS(n)
		}
	}
	return sum * 1e9 / 8
}

// portGbitPerS is one port's rate as plans price it: the file's, or the
// 10 Gbit/s fallback for an Ethernet port whose rate is unknown (left out).
func portGbitPerS(n NICSpec) float64 {
	if n.Type == NICEthernet && n.RateGbitPerS <= 0 {
		return FallbackEthernetGbitPerS
	}
	return n.RateGbitPerS
}

// ethernetBytesPerS is what TCP can use: Ethernet and RoCE ports (RoCE NICs
// are Ethernet NICs), else the assumed 10 Gbit/s management port (also for
// Ethernet ports whose rate the file leaves out as unknown).
func ethernetBytesPerS(nics []NICSpec) float64 {
	v := nicBytesPerS(nics, NICEthernet) + nicBytesPerS(nics, NICRoCE)
	if v == 0 {
		return FallbackEthernetGbitPerS * 1e9 / 8
	}
	return v
}

// compactLinks prices every island pair once (hosts of an island share
// their NICs, so nominal links depend on islands only) and keeps the
// measured matrix as compact codes.
func (f *File) compactLinks(islands []Island, hosts []Host, sockets bool) *compactLinks {
	ni := len(islands)
	l := &compactLinks{islands: ni, nominal: make([]Link, ni*ni), island: make([]int32, len(hosts))}
	for i, h := range hosts {
		l.island[i] = int32(h.Island)
	}
	for a := range islands {
		for b := range islands {
			if len(islands[a].Hosts) == 0 || len(islands[b].Hosts) == 0 {
				continue
			}
			bw, lat := f.nominalLink(islands, hosts[islands[a].Hosts[0]], hosts[islands[b].Hosts[0]], sockets)
			l.nominal[a*ni+b] = Link{BytesPerS: bw, LatencyS: lat}
		}
	}
	m := f.Measured
	if m == nil || len(m.Hosts) == 0 {
		return l
	}
	byName := make(map[string]int, len(hosts))
	for i, h := range hosts {
		byName[h.Name] = i
	}
	hostRow := make([]int32, len(hosts))
	for i := range hostRow {
		hostRow[i] = -1
	}
	for r, name := range m.Hosts {
		if h, ok := byName[name]; ok {
			hostRow[h] = int32(r)
		}
	}
	// Zero entries mean "not measured"; a host's own entry is ignored.
	l.setMeasured(len(hosts), hostRow, len(m.Hosts), func(i, j int) float64 {
		if i == j || m.Hosts[i] == m.Hosts[j] {
			return 0
		}
		return m.GbitPerS[i][j] * 1e9 / 8
	})
	return l
}

// nominalLink is the link between two hosts from their NICs and the
// links section. With sockets, RDMA NICs carry nothing: same-island pairs
// run over their Ethernet (and RoCE ports as Ethernet), and an RDMA link
// between islands is not used.
func (f *File) nominalLink(islands []Island, a, b Host, sockets bool) (float64, float64) {
	ia, ib := islands[a.Island], islands[b.Island]
	if a.Island == b.Island {
		return math.Min(a.NICBytesPerS, b.NICBytesPerS), nicLatency(ia.Spec.NICs, ia.RDMA && !sockets)
	}
	if l, ok := f.findLink(ia.Spec.Name, ib.Spec.Name); ok && !(sockets && l.Type.RDMA()) {
		return linkSpecBytesPerS(l, ia.Spec.NICs, ib.Spec.NICs), linkLatency(l)
	}
	if !sockets && ia.RDMA && ib.RDMA && ia.Spec.Fabric != "" && ia.Spec.Fabric == ib.Spec.Fabric {
		return math.Min(a.NICBytesPerS, b.NICBytesPerS), math.Max(nicLatency(ia.Spec.NICs, true), nicLatency(ib.Spec.NICs, true))
	}
	return math.Min(ethernetBytesPerS(ia.Spec.NICs), ethernetBytesPerS(ib.Spec.NICs)),
		math.Max(nicLatency(ia.Spec.NICs, false), nicLatency(ib.Spec.NICs, false))
}

// nicLatency is the largest latency_us on a host's RDMA NICs (rdma) or its
// Ethernet ones (RoCE counting as Ethernet for TCP), else the default.
func nicLatency(nics []NICSpec, rdma bool) float64 {
	v := 0.0
	for _, n := range nics {
		if rdma == n.Type.RDMA() || (!rdma && n.Type == NICRoCE) {
			v = math.Max(v, n.LatencyMicroseconds*1e-6)
		}
	}
	if v > 0 {
		return v
	}
	return latencyFor(rdma)
}

func latencyFor(rdma bool) float64 {
	if rdma {
		return rdmaLatencyS
	}
	return ethernetLatencyS
}

func (f *File) findLink(a, b string) (LinkSpec, bool) {
	k := linkKey(a, b)
	for _, l := range f.Links {
		if linkKey(l.Between[0], l.Between[1]) == k {
			return l, true
		}
	}
	return LinkSpec{}, false
}

// linkSpecBytesPerS caps a link's rate by both sides' NICs of the kind the
// link uses: an RDMA link by their RDMA aggregates, Ethernet by their
// Ethernet rates.
func linkSpecBytesPerS(l LinkSpec, na, nb []NICSpec) float64 {
	v := l.BandwidthGbitPerS * 1e9 / 8
	if l.Type.RDMA() {
		if hasRDMA(na) && hasRDMA(nb) {
			return math.Min(v, math.Min(ncclNICBytesPerS(na), ncclNICBytesPerS(nb)))
		}
		return v
	}
	return math.Min(v, math.Min(ethernetBytesPerS(na), ethernetBytesPerS(nb)))
}

func linkLatency(l LinkSpec) float64 {
	if l.LatencyMicroseconds > 0 {
		return l.LatencyMicroseconds * 1e-6
	}
	return latencyFor(l.Type.RDMA())
}
