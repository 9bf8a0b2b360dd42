package measure

import (
	"context"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// This test measures the links of real hosts (network namespaces with
// their own sshd) with real iperf3, over real SSH.

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
	pool := remote.NewPool(remotetest.SSH(tb), 0)
	t.Cleanup(func() { pool.Close() })
	pctx, pcancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds a hang: several ssh sessions share it on a busy CI machine
	defer pcancel()
	probed, err := probe.Hosts(pctx, pool, remotetest.Targets(tb), nil)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	probes := map[string]*probe.HostProbe{}
	for _, hp := range probed {
		probes[hp.Target] = hp
	}
	var hosts []Host
	var list []*probe.HostProbe
	for _, h := range tb.Hosts {
		hp := probes[h.Name]
		list = append(list, hp)
		hosts = append(hosts, Host{Name: h.Name, Addr: hp.Addr, Runner: pool.Conn(remote.HostTarget{Name: h.Name})})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	m, err := Measure(ctx, hosts, Options{Seconds: 1, Port: 5301})
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
	f, _, err := probe.BuildClusterFile(list, probe.ClusterOptions{NProcPerNode: 1, Measured: m})
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
