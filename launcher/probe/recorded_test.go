package probe

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// recordedH200VM is the full probe script's output on one NVIDIA H200 VM
// (this project's device machine, 2026-11-30: driver 580.159.04, torch
// 2.11.0+cu130; testdata/PROVENANCE.md), copied unchanged. Its nvidia-smi
// topo -m header carries ANSI underline escapes, and its only NIC, a
// virtual eth0, reports no link speed (sysfs speed -1).
const recordedH200VM = "testdata/recorded/h200-vm.probe.txt"

// TestRecordedH200VM: the real output parses (GPU, topology through the
// escapes, software), and two such hosts make a cluster file that loads
// and plans: the NIC's unknown rate is left out with a warning naming it,
// and plans price the hosts' Ethernet at the 10 Gbit/s fallback. Before,
// the file said rate_gbit_per_s: 0, which every plan then refused.
func TestRecordedH200VM(t *testing.T) {
	raw, err := os.ReadFile(recordedH200VM)
	if err != nil {
		t.Fatal(err)
	}
	var probes []*HostProbe
	for _, name := range []string{"vm1", "vm2"} {
		hp, err := ParseProbeOutput(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		hp.Target = name
		probes = append(probes, hp)
	}
	hp := probes[0]
	if want := []GPU{{0, "NVIDIA H200", 143771, "00000000:00:06.0", 5}}; !reflect.DeepEqual(hp.GPUs, want) {
		t.Errorf("GPUs %+v, want %+v", hp.GPUs, want)
	}
	if hp.Topology == nil || hp.Topology.CPUAffinity["GPU0"] != "0-15" {
		t.Errorf("topology %+v, want GPU0 on CPUs 0-15", hp.Topology)
	}
	if hp.Software.Torch != "2.11.0" || hp.Software.NCCL != "2.28.9" {
		t.Errorf("software %+v", hp.Software)
	}
	if len(hp.NICs) != 1 || hp.NICs[0].Netdev != "eth0" || !hp.NICs[0].Active || hp.NICs[0].RateGbitPerS != 0 {
		t.Errorf("NICs %+v, want eth0 up with no rate", hp.NICs)
	}

	f, warnings, err := BuildClusterFile(probes, ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "Ethernet eth0 reports no link speed") || !strings.Contains(warnings[0], "at 10 Gbit/s") {
		t.Errorf("warnings %q, want one naming eth0's unknown speed", warnings)
	}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "rate_gbit_per_s") {
		t.Errorf("the file gives a rate the NIC never reported:\n%s", data)
	}
	back, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("the probe's own file is refused: %v\n%s", err, data)
	}
	c, err := back.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Hosts[0].GPU; g.Model != "H200" {
		t.Errorf("GPU %+v, want the catalog's H200", g)
	}
	if bw := c.LinkBetween(0, 1).BytesPerS; bw != cluster.FallbackEthernetGbitPerS*1e9/8 {
		t.Errorf("vm1-vm2 priced at %g B/s, want the %g Gbit/s fallback", bw, float64(cluster.FallbackEthernetGbitPerS))
	}
}
