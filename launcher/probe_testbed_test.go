package launcher

import (
	"context"
	"math"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// These tests probe real hosts (network namespaces with their own sshd and
// sysfs) over real SSH, and measure their links with real iperf3.

func bedTargets(tb *testbed.Testbed) []HostTarget {
	var ts []HostTarget
	for _, h := range tb.Hosts {
		ts = append(ts, HostTarget{Name: h.Name})
	}
	return ts
}

func probeBed(t *testing.T, tb *testbed.Testbed) (map[string]*HostProbe, *Pool) {
	t.Helper()
	pool := NewPool(bedSSH(tb), 0)
	t.Cleanup(func() { pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	probes, err := ProbeHosts(ctx, pool, bedTargets(tb), nil)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	byName := map[string]*HostProbe{}
	for _, hp := range probes {
		byName[hp.Target] = hp
	}
	return byName, pool
}

func TestProbeTestbedNICTypes(t *testing.T) {
	tb := testbed.New(t, testbed.Spec{Hosts: []testbed.HostSpec{
		{Name: "ib1", Group: "a", RDMA: "infiniband", RateGbitPerS: 100},
		{Name: "roce1", Group: "b", RDMA: "roce", RateGbitPerS: 25},
		{Name: "eth1", Group: "c"},
	}})
	probes, _ := probeBed(t, tb)
	for _, h := range tb.Hosts {
		hp := probes[h.Name]
		if hp == nil {
			t.Fatalf("%s: no probe result", h.Name)
		}
		if hp.Hostname != h.Name || hp.Addr != h.Addr {
			t.Errorf("%s: hostname %q addr %q, want %q %q", h.Name, hp.Hostname, hp.Addr, h.Name, h.Addr)
		}
		if len(hp.GPUs) != 0 || hp.CPUCores != runtime.NumCPU() || hp.MemoryBytes <= 0 {
			t.Errorf("%s: GPUs %d, cores %d (want %d), memory %d", h.Name, len(hp.GPUs), hp.CPUCores, runtime.NumCPU(), hp.MemoryBytes)
		}
	}
	type nicWant struct {
		typ    cluster.NICType
		name   string
		rate   float64 // 0: any positive rate
		gid    int     // -1: none
		netdev string
	}
	for host, want := range map[string][]nicWant{
		// The IB host's address sits on its Ethernet (veth) eth0, which the
		// fake HCA also names as its netdev: both are listed.
		"ib1": {{cluster.NICInfiniBand, "mlx5_0:1", 100, -1, "eth0"}, {cluster.NICEthernet, "eth0", 0, -1, "eth0"}},
		// RoCE runs over eth0 itself: one NIC, not two.
		"roce1": {{cluster.NICRoCE, "mlx5_0:1", 25, 3, "eth0"}},
		"eth1":  {{cluster.NICEthernet, "eth0", 0, -1, "eth0"}},
	} {
		got := probes[host].NICs
		if len(got) != len(want) {
			t.Errorf("%s: NICs %+v, want %d", host, got, len(want))
			continue
		}
		for i, w := range want {
			n := got[i]
			if n.Type != w.typ || n.Name != w.name || n.Netdev != w.netdev || !n.Active ||
				(w.rate != 0 && n.RateGbitPerS != w.rate) || n.RateGbitPerS <= 0 {
				t.Errorf("%s: NIC %d = %+v, want %+v (active)", host, i, n, w)
			}
			if (w.gid < 0) != (n.GIDIndex == nil) || (n.GIDIndex != nil && *n.GIDIndex != w.gid) {
				t.Errorf("%s: NIC %s GID index %v, want %d", host, n.Name, n.GIDIndex, w.gid)
			}
		}
	}

	// Different hardware: three islands, and the file passes the planner's
	// own validation.
	var list []*HostProbe
	for _, h := range tb.Hosts {
		list = append(list, probes[h.Name])
	}
	f, _, err := BuildClusterFile(list, ClusterOptions{NProcPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Clusters) != 3 {
		t.Errorf("%d clusters, want 3", len(f.Clusters))
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Parse(data); err != nil {
		t.Errorf("probed cluster file does not parse: %v\n%s", err, data)
	}
}

// Two groups of two plain-Ethernet hosts, the links between the groups
// shaped to 100 Mbit/s: the measured matrix must show the slow pairs, and
// the cluster file must split the (identical) hosts into two islands.
func TestMeasureTestbedFindsSlowLinks(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatal("iperf3 missing: install the Debian package iperf3")
	}
	tb := testbed.New(t, testbed.Spec{GroupShape: "100mbit", Hosts: []testbed.HostSpec{
		{Name: "a1", Group: "a"}, {Name: "a2", Group: "a"},
		{Name: "b1", Group: "b"}, {Name: "b2", Group: "b"},
	}})
	probes, pool := probeBed(t, tb)
	var hosts []MeasureHost
	var list []*HostProbe
	for _, h := range tb.Hosts {
		hp := probes[h.Name]
		list = append(list, hp)
		hosts = append(hosts, MeasureHost{Name: h.Name, Addr: hp.Addr, Runner: pool.Conn(HostTarget{Name: h.Name})})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m, err := Measure(ctx, hosts, MeasureOptions{Seconds: 1, Port: 5301})
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	t.Logf("measured (Gbit/s):\n%s", MatrixTable(m))
	group := func(name string) byte { return name[0] }
	for i, a := range m.Hosts {
		for j, b := range m.Hosts {
			if i == j {
				continue
			}
			// The two pairs of a round that cross groups share the shaped
			// uplink, so each may see half of 100 Mbit/s.
			r := m.GbitPerS[i][j]
			if group(a) == group(b) {
				if r < 1 {
					t.Errorf("%s->%s inside a group: %.3f Gbit/s, want > 1 (unshaped veth)", a, b, r)
				}
			} else if r < 0.02 || r > 0.11 {
				t.Errorf("%s->%s between groups: %.3f Gbit/s, want 0.02-0.11 (shaped to 100mbit)", a, b, r)
			}
		}
	}
	f, _, err := BuildClusterFile(list, ClusterOptions{NProcPerNode: 1, Measured: m})
	if err != nil {
		t.Fatal(err)
	}
	var islands []string
	for _, c := range f.Clusters {
		var names []string
		for _, h := range c.Hosts {
			names = append(names, h.Name)
		}
		islands = append(islands, strings.Join(names, ","))
	}
	if strings.Join(islands, " ") != "a1,a2 b1,b2" {
		t.Errorf("islands %q, want [a1,a2 b1,b2]", islands)
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := cluster.Parse(data)
	if err != nil || back.Measured == nil || len(back.Measured.GbitPerS) != 4 {
		t.Fatalf("cluster file with the matrix does not round-trip: %v\n%s", err, data)
	}
	// The planner takes the measured figures for the host pairs.
	c, err := back.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	idx := map[string]int{}
	for i, h := range m.Hosts {
		idx[h] = i
	}
	for i := range c.Hosts {
		for j := range c.Hosts {
			mi, mj := idx[c.Hosts[i].Name], idx[c.Hosts[j].Name]
			if got, want := c.LinkBetween(i, j).BytesPerS, m.GbitPerS[mi][mj]*1e9/8; i != j && math.Abs(got-want) > 1e-6*want {
				t.Errorf("planner link %s->%s %.0f B/s, want the measured %.0f", c.Hosts[i].Name, c.Hosts[j].Name, got, want)
			}
		}
	}
	// The one-off servers exit after their test: nothing left on any host.
	for _, h := range tb.Hosts {
		procs, err := tb.Processes(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if strings.Contains(p.Cmdline, "iperf3") {
				t.Errorf("%s: left running: %d %s", h.Name, p.Pid, p.Cmdline)
			}
		}
	}
}
