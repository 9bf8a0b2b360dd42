package probe

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// These tests probe real hosts (network namespaces with their own sshd and
// sysfs) over real SSH, and measure their links with real iperf3.

func probeBed(t *testing.T, tb *testbed.Testbed) (map[string]*HostProbe, *remote.Pool) {
	t.Helper()
	pool := remote.NewPool(remotetest.SSH(tb), 0)
	t.Cleanup(func() { pool.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds a hang: several ssh sessions share it on a busy CI machine
	defer cancel()
	probes, err := Hosts(ctx, pool, remotetest.Targets(tb), nil)
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
