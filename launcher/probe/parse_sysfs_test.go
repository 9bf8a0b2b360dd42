package probe

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

const sysfsFixture = "testdata/sysfs/procfs-fixtures"

func TestParseIBRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "200 Gb/sec (4X HDR)", want: 200},
		{in: "100 Gb/sec (4X EDR)\n", want: 100},
		{in: "2.5 Gb/sec (1X SDR)", want: 2.5},
		{in: "400 Gb/sec (4X NDR)", want: 400},
		{in: "10 Mb/sec", want: 0.01},
		{in: "fast", bad: true},
		{in: "", bad: true},
	} {
		got, err := ParseIBRate(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseIBRate(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestParsePortState(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   PortState
		active bool
		bad    bool
	}{
		{in: "4: ACTIVE", want: PortState{4, "ACTIVE"}, active: true},
		{in: "5: LinkUp", want: PortState{5, "LinkUp"}},
		{in: "1: DOWN\n", want: PortState{1, "DOWN"}},
		{in: "4", want: PortState{Code: 4}, active: true},
		{in: "ACTIVE", want: PortState{Text: "ACTIVE"}, active: true},
		{in: "x: ACTIVE", bad: true},
		{in: "  ", bad: true},
	} {
		got, err := ParsePortState(tc.in)
		if (err != nil) != tc.bad || got != tc.want || (err == nil && got.Active() != tc.active) {
			t.Errorf("ParsePortState(%q) = %+v, %v (active %v); want %+v active %v error %v", tc.in, got, err, got.Active(), tc.want, tc.active, tc.bad)
		}
	}
	if s := (PortState{Code: 4}).String(); s != "ACTIVE" {
		t.Errorf("code-only state names itself %q, want ACTIVE", s)
	}
}

func TestParseNetSpeed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1000\n", 1, true}, {"100000", 100, true}, {"-1", 0, false}, {"", 0, false}, {"x", 0, false},
	} {
		got, ok := ParseNetSpeed(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseNetSpeed(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseEthtoolCapture(t *testing.T) {
	got, ok := ParseEthtoolSpeed(readTestdata(t, "ethtool", "eth0.settings.txt"))
	if !ok || got != 1 {
		t.Errorf("ethtool capture: %v Gbit/s, %v; want 1, true", got, ok)
	}
	if _, ok := ParseEthtoolSpeed("Settings for eth1:\n\tSpeed: Unknown!\n"); ok {
		t.Error("Speed: Unknown! must not parse")
	}
}

func TestParseMemTotalAndCPUs(t *testing.T) {
	mem, err := ParseMemTotal("MemTotal:       263842712 kB\nMemFree:  1 kB\n")
	if err != nil || mem != 263842712*1024 {
		t.Errorf("ParseMemTotal = %d, %v", mem, err)
	}
	if _, err := ParseMemTotal("MemFree: 1 kB\n"); err == nil {
		t.Error("want an error without MemTotal")
	}
	if n := ParseCPUInfoCount("processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n"); n != 2 {
		t.Errorf("cpuinfo count %d, want 2", n)
	}
}

func TestPickRoCEGID(t *testing.T) {
	for _, tc := range []struct {
		name string
		gids []RoCEGID
		want int
		ok   bool
	}{
		{"none", nil, 0, false},
		{"v2 with IPv4 wins", []RoCEGID{
			{0, "IB/RoCE v1", "fe80:0000:0000:0000:0a7f:bcff:fe12:45ef"},
			{1, "RoCE v2", "fe80:0000:0000:0000:0a7f:bcff:fe12:45ef"},
			{2, "IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:c612:000b"},
			{3, "RoCE v2", "0000:0000:0000:0000:0000:ffff:c612:000b"},
		}, 3, true},
		{"any v2 over v1", []RoCEGID{{0, "IB/RoCE v1", "fe80::1"}, {1, "RoCE v2", "fe80::1"}}, 1, true},
		{"v1 only: lowest", []RoCEGID{{2, "IB/RoCE v1", "x"}, {0, "IB/RoCE v1", "y"}}, 0, true},
	} {
		got, ok := PickRoCEGID(tc.gids)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// wantFixtureRDMA is what the real procfs sysfs capture holds.
var wantFixtureRDMA = []NIC{
	{Type: cluster.NICInfiniBand, Name: "hfi1_0:1", RateGbitPerS: 100, State: "ACTIVE", PhysState: "LinkUp", Active: true},
	{Type: cluster.NICInfiniBand, Name: "mlx4_0:1", RateGbitPerS: 40, State: "ACTIVE", PhysState: "LinkUp", Active: true},
	{Type: cluster.NICInfiniBand, Name: "mlx4_0:2", RateGbitPerS: 40, State: "ACTIVE", PhysState: "LinkUp", Active: true},
	{Type: cluster.NICInfiniBand, Name: "mlx5_0:1", RateGbitPerS: 25, State: "ACTIVE", PhysState: "ACTIVE", Active: true},
}

var wantFixtureEth = NIC{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", RateGbitPerS: 1, State: "up", Active: true, MTU: 1500}

func TestRDMAPortsFixture(t *testing.T) {
	got := RDMAPorts(dirView{Root: sysfsFixture})
	if !reflect.DeepEqual(got, wantFixtureRDMA) {
		t.Errorf("got\n%+v\nwant\n%+v", got, wantFixtureRDMA)
	}
}

// The captured eth0 has no `device` link (procfs' capture leaves symlinks
// out), so it counts only as the interface holding the host's address.
func TestEthernetNICsFixture(t *testing.T) {
	v := dirView{Root: sysfsFixture}
	if got := EthernetNICs(v, nil, ""); len(got) != 0 {
		t.Errorf("virtual interface without the host address kept: %+v", got)
	}
	got := EthernetNICs(v, nil, "eth0")
	if !reflect.DeepEqual(got, []NIC{wantFixtureEth}) {
		t.Errorf("got %+v, want %+v", got, wantFixtureEth)
	}
	// eth0 as a RoCE port's netdev belongs to that NIC, not to Ethernet.
	if got := EthernetNICs(v, []NIC{{Type: cluster.NICRoCE, Netdev: "eth0"}}, "eth0"); len(got) != 0 {
		t.Errorf("RoCE netdev listed as Ethernet too: %+v", got)
	}
}

// bondAndBridgeTree lays out a /sys/class/net the way the kernel shows a
// bond of two 25G ports (bond0 reports their sum) and a bridge over a 10G
// port (br0 reports no speed), plus docker0. Built for this test: the
// captured fixtures have neither.
func bondAndBridgeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	net := filepath.Join(root, "sys", "class", "net")
	ifc := func(name string, files map[string]string, device bool, master string) {
		dir := filepath.Join(net, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if device {
			os.MkdirAll(filepath.Join(dir, "device"), 0o755)
		}
		if master != "" {
			if err := os.Symlink("../"+master, filepath.Join(dir, "master")); err != nil {
				t.Fatal(err)
			}
		}
	}
	up := func(speed string) map[string]string {
		m := map[string]string{"type": "1", "operstate": "up", "mtu": "9000", "carrier": "1"}
		if speed != "" {
			m["speed"] = speed
		}
		return m
	}
	ifc("bond0", up("50000"), false, "")
	ifc("br0", up(""), false, "")
	ifc("docker0", up("10000"), false, "")
	ifc("eth0", up("25000"), true, "bond0")
	ifc("eth1", up("25000"), true, "bond0")
	ifc("eth2", up("10000"), true, "br0")
	ifc("eth3", up("100000"), true, "")
	return root
}

func TestEthernetNICsBondsAndBridges(t *testing.T) {
	root := bondAndBridgeTree(t)
	// The host's address on bond0, then on br0; eth3 is a free port.
	for _, tc := range []struct {
		addrIface string
		want      map[string]float64
	}{
		{"bond0", map[string]float64{"bond0": 50, "eth3": 100}},
		{"br0", map[string]float64{"br0": 10, "eth3": 100}},
	} {
		for _, v := range []struct {
			name string
			view sysView
		}{
			{"local", dirView{Root: root}},
			{"script", mustSplit(t, runProbeScript(t, root)).view},
		} {
			got := map[string]float64{}
			for _, n := range EthernetNICs(v.view, nil, tc.addrIface) {
				got[n.Name] = n.RateGbitPerS
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s, address on %s: %v, want %v", v.name, tc.addrIface, got, tc.want)
			}
		}
	}
}

func mustSplit(t *testing.T, out string) *Output {
	t.Helper()
	po, err := SplitOutput(out)
	if err != nil {
		t.Fatal(err)
	}
	return po
}
