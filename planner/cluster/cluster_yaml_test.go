package cluster

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

func mustParseCluster(t *testing.T, doc string) *File {
	t.Helper()
	f, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("ParseClusterFile: %v", err)
	}
	return f
}

func mustResolve(t *testing.T, doc string) *Cluster {
	t.Helper()
	c, err := mustParseCluster(t, doc).Resolve()
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }

func TestExampleClusterFilesResolve(t *testing.T) {
	cases := []struct {
		file  string
		gpus  int
		hosts int
	}{
		{"../../examples/cluster.yaml", 32, 4},
		{"../../examples/two-clusters.yaml", 32, 4},
		{"../../examples/small-offload.yaml", 4, 1},
	}
	for _, c := range cases {
		data, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		cl := mustResolve(t, string(data))
		if cl.TotalGPUs() != c.gpus || len(cl.Hosts) != c.hosts {
			t.Errorf("%s: %d GPUs on %d hosts, want %d on %d", c.file, cl.TotalGPUs(), len(cl.Hosts), c.gpus, c.hosts)
		}
	}
}

func TestResolveDefaultCluster(t *testing.T) {
	data, err := os.ReadFile("../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := mustResolve(t, string(data))
	h := c.Hosts[2]
	want := Host{
		HostEntry: HostEntry{Name: "a100-03", Address: "a100-03"}, Island: 0, GPUs: 8,
		GPU:            gpu.Spec{Model: "A100-80GB-SXM", MemoryGiB: 80, PeakTFLOPS: 312, MemoryBandwidthTBPerS: 2.039, PeakFP32TFLOPS: 156, SMs: 108},
		IntraBytesPerS: 300e9, NICBytesPerS: 8 * 200e9 / 8, MemoryBytes: 1024 * gpu.GiB,
		PCIeBytesPerS: 25e9, CPUCores: 128, HostMemBytesPerS: 200e9,
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("host 2:\n got %+v\nwant %+v", h, want)
	}
	if l := c.LinkBetween(0, 3); !near(l.BytesPerS, 200e9) || l.LatencyS != rdmaLatencyS {
		t.Errorf("link 0-3 = %+v, want 200e9 B/s at 2us (8 x 200 Gbit/s IB)", l)
	}
	if !c.Islands[0].RDMA || !reflect.DeepEqual(c.Islands[0].Hosts, []int{0, 1, 2, 3}) {
		t.Errorf("island = %+v", c.Islands[0])
	}
}

func TestResolveTwoClustersLinks(t *testing.T) {
	data, err := os.ReadFile("../../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Per-group transport (Holmes): RDMA inside the IB island.
	c, err := mustParseCluster(t, string(data)).ResolveFor(fabric.TransportPerGroup)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		a, b int
		bw   float64
		lat  float64
	}{
		{0, 1, 8 * 400e9 / 8, rdmaLatencyS},     // IB island: 8 x 400G HDR aggregate
		{2, 3, 2 * 100e9 / 8, ethernetLatencyS}, // Ethernet island: 2 x 100GbE
		{0, 2, 25e9 / 8, 30e-6},                 // the 25 Gbit/s link, its latency
		{3, 1, 25e9 / 8, 30e-6},
		{1, 1, 450e9, intraHostLatencyS}, // NVSwitch H100 from the catalog
		{2, 2, 25e9, intraHostLatencyS},  // L40S on PCIe gen4
	}
	for _, k := range cases {
		l := c.LinkBetween(k.a, k.b)
		if !near(l.BytesPerS, k.bw) || !near(l.LatencyS, k.lat) {
			t.Errorf("link %d-%d = %+v, want %g B/s %g s", k.a, k.b, l, k.bw, k.lat)
		}
	}
	if !c.Islands[0].RDMA || c.Islands[1].RDMA {
		t.Errorf("RDMA flags = %v, %v; want true, false", c.Islands[0].RDMA, c.Islands[1].RDMA)
	}
}

// The default transport (and --nccl-mode auto when rendering) runs a job
// that spans islands without a shared RDMA fabric on sockets everywhere, so
// the IB island's hosts talk over their 25 GbE port, not 8 x 400G IB; one
// island alone, or islands on one fabric, keep RDMA.
func TestResolveTransportPricesSockets(t *testing.T) {
	data, err := os.ReadFile("../../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		t    fabric.Transport
		bw   float64
		lat  float64
	}{
		{"auto spans islands", fabric.TransportAuto, 25e9 / 8, ethernetLatencyS},
		{"sockets", fabric.TransportSockets, 25e9 / 8, ethernetLatencyS},
		{"per-group", fabric.TransportPerGroup, 8 * 400e9 / 8, rdmaLatencyS},
	} {
		c, err := mustParseCluster(t, string(data)).ResolveFor(tc.t)
		if err != nil {
			t.Fatal(err)
		}
		if l := c.LinkBetween(0, 1); !near(l.BytesPerS, tc.bw) || !near(l.LatencyS, tc.lat) {
			t.Errorf("%s: IB-island link = %+v, want %g B/s %g s", tc.name, l, tc.bw, tc.lat)
		}
		if l := c.LinkBetween(0, 2); !near(l.BytesPerS, 25e9/8) {
			t.Errorf("%s: cross-island link = %+v, want the 25 Gbit/s link", tc.name, l)
		}
	}
	one := mustResolve(t, `
clusters:
  - name: ib
    hosts: a[1-2]
    gpus_per_host: 4
    gpu: {model: H100}
    nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}, {type: ethernet, count: 1, rate_gbit_per_s: 10}]
`)
	if l := one.LinkBetween(0, 1); !near(l.BytesPerS, 4*200e9/8) || !near(l.LatencyS, rdmaLatencyS) {
		t.Errorf("one IB island under auto = %+v, want RDMA at 4 x 200G", l)
	}
}

const twoIslandsNoLink = `
clusters:
  - name: ib
    hosts: a[1-2]
    gpus_per_host: 4
    gpu: {model: H100}
    nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}]
    FABRIC_A
  - name: other
    hosts: b[1-2]
    gpus_per_host: 4
    gpu: {model: H100}
    nics: [NICS_B]
    FABRIC_B
`

func TestResolveInterIslandFallbacks(t *testing.T) {
	cases := []struct {
		name, nicsB, fabA, fabB string
		bw, lat                 float64
	}{
		{"IB-only vs 100GbE: assumed 10G Ethernet", "{type: ethernet, count: 1, rate_gbit_per_s: 100}", "", "", 10e9 / 8, ethernetLatencyS},
		{"IB-only vs 1GbE: the slower side", "{type: ethernet, count: 1, rate_gbit_per_s: 1}", "", "", 1e9 / 8, ethernetLatencyS},
		{"IB vs IB, different fabrics: Ethernet", "{type: infiniband, count: 2, rate_gbit_per_s: 100}", "fabric: x", "fabric: y", 10e9 / 8, ethernetLatencyS},
		{"IB vs IB on one fabric: RDMA at the smaller aggregate", "{type: infiniband, count: 2, rate_gbit_per_s: 100}", "fabric: x", "fabric: x", 200e9 / 8, rdmaLatencyS},
		{"IB vs RoCE: RoCE port carries TCP, IB side 10G", "{type: roce, count: 2, rate_gbit_per_s: 100}", "", "", 10e9 / 8, ethernetLatencyS},
		{"IB vs Ethernet of unknown rate (a virtual NIC): 10G", "{type: ethernet, count: 1}", "", "", 10e9 / 8, ethernetLatencyS},
	}
	for _, k := range cases {
		doc := strings.NewReplacer("NICS_B", k.nicsB, "FABRIC_A", k.fabA, "FABRIC_B", k.fabB).Replace(twoIslandsNoLink)
		c := mustResolve(t, doc)
		l := c.LinkBetween(1, 2)
		if !near(l.BytesPerS, k.bw) || l.LatencyS != k.lat {
			t.Errorf("%s: %+v, want %g B/s %g s", k.name, l, k.bw, k.lat)
		}
	}
}

func TestResolveMeasuredOverridesSomePairs(t *testing.T) {
	doc := `
clusters:
  - name: ib
    hosts: a[1-3]
    gpus_per_host: 8
    gpu: {model: A100-80GB-SXM}
    nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}]
measured:
  measured_at: 2026-01-01T00:00:00Z
  hosts: [a3, a1]
  gbit_per_s:
    - [0, 400]
    - [0, 0]
`
	c := mustResolve(t, doc)
	cases := []struct {
		a, b int
		bw   float64
	}{
		{2, 0, 400e9 / 8}, // measured a3 -> a1
		{0, 2, 800e9 / 8}, // a1 -> a3 not measured (0): nominal
		{0, 1, 800e9 / 8}, // a2 not in the matrix: nominal
	}
	for _, k := range cases {
		if l := c.LinkBetween(k.a, k.b); !near(l.BytesPerS, k.bw) || l.LatencyS != rdmaLatencyS {
			t.Errorf("link %d-%d = %+v, want %g", k.a, k.b, l, k.bw)
		}
	}
}

func TestHostEntriesForms(t *testing.T) {
	doc := `
clusters:
  - name: x
    hosts:
      - n[1-2]
      - m1
      - {name: q1, address: 198.18.0.5, user: train, port: 2222}
    gpus_per_host: 1
    gpu: {model: L4}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 10}]
`
	f := mustParseCluster(t, doc)
	want := HostEntries{{Name: "n1"}, {Name: "n2"}, {Name: "m1"}, {Name: "q1", Address: "198.18.0.5", User: "train", Port: 2222}}
	if !reflect.DeepEqual(f.Clusters[0].Hosts, want) {
		t.Errorf("hosts = %+v", f.Clusters[0].Hosts)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.Hosts[0].Address != "n1" || c.Hosts[3].Address != "198.18.0.5" {
		t.Errorf("addresses: %q %q", c.Hosts[0].Address, c.Hosts[3].Address)
	}
}

func TestClusterFileMarshalRoundTrip(t *testing.T) {
	for _, file := range []string{"../../examples/cluster.yaml", "../../examples/two-clusters.yaml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f := mustParseCluster(t, string(data))
		gid := 3
		f.Clusters[0].NICs[0].GIDIndex = &gid
		f.Clusters[0].Hosts[0].User = "train"
		out, err := f.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		g := mustParseCluster(t, string(out))
		if !reflect.DeepEqual(f, g) {
			t.Errorf("%s: round trip differs:\n%s", file, out)
		}
	}
}

const validBase = `
clusters:
  - name: a
    hosts: a[1-2]
    gpus_per_host: 8
    gpu: {model: H100}
    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 400}]
  - name: b
    hosts: b1
    gpus_per_host: 8
    gpu: {model: L40S}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 100}]
`

func TestParseClusterFileErrors(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"zero GPUs", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_host: 0\n    gpu: {model: L40S}", "clusters[1].gpus_per_host (line 10, column 20): must be 1..64, got 0"},
		{"typo key", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_hots: 8\n    gpu: {model: L40S}", `clusters[1].gpus_per_hots (line 10, column 5): unknown field "gpus_per_hots"; the fields here are name, hosts, gpus_per_host,`},
		{"unknown GPU", "{model: L40S}", "{model: Z9000}", `clusters[1].gpu.model (line 11, column 18): unknown GPU "Z9000": the catalog has GB200, B200, `},
		{"unknown GPU, memory given", "{model: L40S}", "{model: Z9000, memory_gib: 40}", `clusters[1].gpu.model (line 11, column 18): unknown GPU "Z9000": the catalog has GB200, B200, GH200, H200, H100-NVL, H100-PCIe, H100-SXM, A100-80GB-PCIe, A100-80GB-SXM, A100-40GB-PCIe, A100-40GB-SXM, V100-32GB-PCIe, V100-32GB-SXM2, V100-16GB-PCIe, V100-16GB-SXM2, L40S, L40, L4, A10, RTX-A6000, RTX-4090, RTX-4080-SUPER, RTX-3090, TITAN-RTX, RTX-2080-Ti, MI250X, MI300X; for a GPU of your own give peak_bf16_tflops`},
		{"negative memory", "{model: L40S}", "{model: L40S, memory_gib: -4}", "clusters[1].gpu.memory_gib (line 11, column 36): must be 0 (not given) or a number from 0.001 to 100000 GiB, got -4"},
		{"negative NIC rate", "rate_gbit_per_s: 100", "rate_gbit_per_s: -100", "clusters[1].nics[0].rate_gbit_per_s (line 12, column 56): must be 0 (not given) or a number from 0.001 to 100000 Gbit/s, got -100"},
		{"NIC latency out of range", "rate_gbit_per_s: 100}", "rate_gbit_per_s: 100, latency_us: -3}", "clusters[1].nics[0].latency_us (line 12, column 73): must be 0 (not given) or a number from 0.001 to 1000000 us, got -3"},
		{"bad NIC type", "type: ethernet", "type: wifi", `clusters[1].nics[0].type (line 12, column 19): must be infiniband, roce or ethernet, got "wifi"`},
		{"duplicate host", "hosts: b1", "hosts: a2", `clusters[1].hosts[0] (line 9, column 12): duplicate host "a2" (also clusters[0].hosts[1])`},
		{"duplicate name", "name: b", "name: a", `clusters[1].name (line 8, column 11): duplicate name "a"`},
		{"bad hostlist", "hosts: b1", "hosts: b[1-", `clusters[1].hosts (line 9, column 12): host list "b[1-": unclosed '['`},
		{"malformed YAML", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_host: [8\n    gpu: {model: L40S}", "line "},
		{"unknown host key", "hosts: b1", "hosts: [{name: b1, adress: x}]", `unknown field "adress"`},
		{"bad intra type", "gpu: {model: L40S}", "gpu: {model: L40S}\n    intra_host: {type: pci}", "clusters[1].intra_host.type (line 12, column 24): must be nvlink, nvswitch or pcie"},
		{"bad pcie gen", "gpu: {model: L40S}", "gpu: {model: L40S}\n    pcie_gen: 7", "clusters[1].pcie_gen (line 12, column 15): must be 3, 4, 5 or 6"},
		{"link to unknown island", "", "links: [{between: [a, c], type: ethernet, bandwidth_gbit_per_s: 10}]", `links[0].between[1] (line 13, column 23): unknown cluster "c"`},
		{"link without bandwidth", "", "links: [{between: [a, b], type: ethernet}]", "links[0].bandwidth_gbit_per_s (line 13, column 9): must be a number from 0.001 to 100000 Gbit/s, got 0"},
		{"measured unknown host", "", "measured: {hosts: [a1, zz], gbit_per_s: [[0, 1], [1, 0]]}", `measured.hosts[1] (line 13, column 24): unknown host "zz"`},
		{"measured ragged", "", "measured: {hosts: [a1, a2], gbit_per_s: [[0, 1], [1]]}", "measured.gbit_per_s[1] (line 13, column 50): needs 2 columns, got 1"},
		{"fractional GPUs", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_host: 8.5\n    gpu: {model: L40S}", "cluster file: clusters[1].gpus_per_host (line 10, column 20): got 8.5 (not a whole number); want an integer"},
		{"runaway GPUs", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_host: 99999999999\n    gpu: {model: L40S}", "cluster file: clusters[1].gpus_per_host (line 10, column 20): 99999999999 is out of range; want an integer below 2^31"},
		{"too many GPUs", "gpus_per_host: 8\n    gpu: {model: L40S}", "gpus_per_host: 100\n    gpu: {model: L40S}", "cluster file: clusters[1].gpus_per_host (line 10, column 20): must be 1..64, got 100"},
		{"20000 hosts", "hosts: b1", "hosts: node[1-20000]", `cluster file: clusters[1].hosts (line 9, column 12): host list "node[1-20000]": range "1-20000" names more than 16384 hosts (the limit of one job)`},
		{"product of ranges", "hosts: b1", "hosts: rack[1-1000]-node[1-1000]", `cluster file: clusters[1].hosts (line 9, column 12): host list "rack[1-1000]-node[1-1000]" names more than 16384 hosts (the limit of one job)`},
		{"hosts over all islands", "hosts: b1", "hosts: [\"b[1-16000]\", \"c[1-384]\"]", `cluster file: clusters[1].hosts (line 9, column 27): the file names more than 16384 hosts (the limit of one job) by here`},
		{"shell in name", "hosts: b1", "hosts: a;b", `cluster file: clusters[1].hosts[0] (line 9, column 12): host "a;b": contains ';' at byte 1`},
		{"command substitution", "hosts: b1", "hosts: [\"host$(id)\"]", `clusters[1].hosts[0] (line 9, column 13): host "host$(id)": contains '$' at byte 4`},
		{"ssh option", "hosts: b1", "hosts: [-oProxyCommand=x]", `clusters[1].hosts[0] (line 9, column 13): host "-oProxyCommand=x": starts with '-', which ssh would read as an option`},
		{"ip and command", "hosts: b1", "hosts: [\"1.2.3.4; id\"]", `clusters[1].hosts[0] (line 9, column 13): host "1.2.3.4; id": contains ';' at byte 7`},
		{"map name", "hosts: b1", "hosts: [{name: \"b1 x\"}]", `clusters[1].hosts[0].name (line 9, column 20): "b1 x": contains ' ' at byte 2`},
		{"map address", "hosts: b1", "hosts: [{name: b1, address: \"$(x)\"}]", `clusters[1].hosts[0].address (line 9, column 33): "$(x)": contains '$' at byte 0`},
		{"map user", "hosts: b1", "hosts: [{name: b1, user: -x}]", `clusters[1].hosts[0].user (line 9, column 30): user name "-x" starts with '-'`},
		{"no NICs on multi-host", "nics: [{type: ethernet, count: 1, rate_gbit_per_s: 100}]", "", "clusters[1].nics (line 8, column 5): at least one NIC is required"},
	}
	for _, c := range cases {
		doc := validBase
		if c.old == "" {
			doc += c.new + "\n"
		} else {
			if !strings.Contains(doc, c.old) {
				t.Fatalf("%s: base lacks %q", c.name, c.old)
			}
			doc = strings.Replace(doc, c.old, c.new, 1)
		}
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, err, c.want)
		}
	}
	if _, err := Parse(nil); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := Parse([]byte(validBase)); err != nil {
		t.Errorf("base document must be valid: %v", err)
	}
}

func TestMarshalRoundTripMeasured(t *testing.T) {
	doc := validBase + `measured:
  measured_at: 2026-03-04T05:06:07Z
  tool: iperf3
  hosts: [a1, b1]
  gbit_per_s: [[0, 9.4], [9.3, 0]]
links: [{between: [a, b], type: ethernet, bandwidth_gbit_per_s: 25, latency_us: 30}]
`
	f := mustParseCluster(t, doc)
	out, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if g := mustParseCluster(t, string(out)); !reflect.DeepEqual(f, g) {
		t.Errorf("round trip differs:\n%s", out)
	}
}

// A NIC's latency_us is the latency of host-to-host traffic over it: the
// island's own pairs take it (the largest given on the NICs they use),
// pairs of islands without a links entry the larger of the two sides',
// and a links entry's own latency_us still decides for its pair. Without
// it each kind keeps its default (2 us RDMA, 20 us TCP).
func TestNICLatency(t *testing.T) {
	doc := `
clusters:
  - name: gcp
    hosts: g[1-2]
    gpus_per_host: 4
    gpu: {model: A100-40GB-SXM}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 19.4, latency_us: 1500}]
  - name: ib
    hosts: i[1-2]
    gpus_per_host: 8
    gpu: {model: H100}
    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 400, latency_us: 3}, {type: ethernet, count: 1, rate_gbit_per_s: 100}]
  - name: plain
    hosts: p1
    gpus_per_host: 8
    gpu: {model: H100}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 100}]
links: [{between: [ib, plain], type: ethernet, bandwidth_gbit_per_s: 100, latency_us: 40}]
`
	c := mustResolve(t, doc)
	host := func(name string) int {
		for i, h := range c.Hosts {
			if h.Name == name {
				return i
			}
		}
		t.Fatalf("no host %s", name)
		return -1
	}
	for _, tc := range []struct {
		a, b string
		want float64
	}{
		{"g1", "g2", 1500e-6}, // the island's NIC latency
		// Islands without RDMA in the cluster put NCCL on TCP everywhere:
		// the ib island's pairs run over its Ethernet port, which gives none.
		{"i1", "i2", ethernetLatencyS},
		{"g1", "i1", 1500e-6}, // no links entry: Ethernet, the larger side's
		{"i1", "p1", 40e-6},   // the links entry's own latency
		{"g1", "p1", 1500e-6},
	} {
		if got := c.LinkBetween(host(tc.a), host(tc.b)).LatencyS; math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s-%s: latency %g s, want %g", tc.a, tc.b, got, tc.want)
		}
	}
	ibOnly := mustResolve(t, "clusters:\n"+doc[strings.Index(doc, "  - name: ib"):strings.Index(doc, "  - name: plain")])
	if got := ibOnly.LinkBetween(0, 1).LatencyS; got != 3e-6 {
		t.Errorf("RDMA inside the island: %g s, want the InfiniBand NICs' 3 us", got)
	}
	base := mustResolve(t, strings.ReplaceAll(doc, ", latency_us: 1500", ""))
	if got := base.LinkBetween(host("g1"), host("g2")).LatencyS; got != ethernetLatencyS {
		t.Errorf("without latency_us: %g s, want the TCP default %g", got, ethernetLatencyS)
	}
}

// TestNICRateUnknownOnlyForEthernet: an Ethernet entry may leave its rate
// out (a virtual NIC reports none; probe writes it so), an RDMA one may not.
func TestNICRateUnknownOnlyForEthernet(t *testing.T) {
	for _, tc := range []struct {
		nic, err string
	}{
		{"{type: ethernet, count: 1, netdevs: [eth0]}", ""},
		{"{type: ethernet, count: 1, rate_gbit_per_s: 0}", ""},
		{"{type: infiniband, count: 4}", "clusters[0].nics[0].rate_gbit_per_s"},
		{"{type: roce, count: 2}", "clusters[0].nics[0].rate_gbit_per_s"},
		{"{type: ethernet, count: 1, rate_gbit_per_s: -1}", "clusters[0].nics[0].rate_gbit_per_s"},
	} {
		doc := "clusters:\n  - name: vm\n    hosts: vm[1-2]\n    gpus_per_host: 1\n    gpu: {model: H200}\n    nics: [" + tc.nic + "]\n"
		_, err := Parse([]byte(doc))
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: err = %v, want %q", tc.nic, err, tc.err)
		}
	}
}
