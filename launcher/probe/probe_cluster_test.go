package probe

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// probeOfCaptures runs the probe script over the captured sysfs tree with
// an nvidia-smi replaying a real capture (empty: no GPUs).
func probeOfCaptures(t *testing.T, target, gpuCapture, addr string) *HostProbe {
	t.Helper()
	root, _ := filepath.Abs(sysfsFixture)
	env := []string{"SSH_CONNECTION=198.18.0.1 40000 " + addr + " 22", "PATH=/usr/bin:/bin"}
	if gpuCapture != "" {
		env[1] = fakeNvidiaSMI(t, gpuCapture, false)
	}
	hp, err := ParseProbeOutput(runProbeScript(t, root, env...))
	if err != nil {
		t.Fatal(err)
	}
	hp.Target = target
	return hp
}

func TestBuildClusterFileGroupsIdenticalHosts(t *testing.T) {
	probes := []*HostProbe{
		probeOfCaptures(t, "gpu1", "nvidia-h100-80gb-hbm3", "198.18.0.11"),
		probeOfCaptures(t, "cpu1", "", "198.18.0.12"),
		probeOfCaptures(t, "gpu2", "nvidia-h100-80gb-hbm3", "198.18.0.13"),
	}
	if _, _, err := BuildClusterFile(probes, ClusterOptions{}); err == nil || !strings.Contains(err.Error(), "--nproc-per-node") {
		t.Fatalf("GPU-less host without --nproc-per-node: err = %v", err)
	}
	f, warnings, err := BuildClusterFile(probes, ClusterOptions{NProcPerNode: 2,
		Entries: map[string]cluster.HostEntry{"gpu2": {Name: "gpu2", User: "ops", Port: 2222}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q for a catalogued GPU", warnings)
	}
	if len(f.Clusters) != 2 {
		t.Fatalf("%d clusters, want 2 (GPU hosts, CPU host)", len(f.Clusters))
	}
	gpuIsland, cpu := f.Clusters[0], f.Clusters[1]
	wantHosts := cluster.HostEntries{{Name: "gpu1", Address: "198.18.0.11"}, {Name: "gpu2", Address: "198.18.0.13", User: "ops", Port: 2222}}
	if !reflect.DeepEqual(gpuIsland.Hosts, wantHosts) {
		t.Errorf("GPU island hosts %+v, want %+v", gpuIsland.Hosts, wantHosts)
	}
	// From the catalog by nvidia-smi's name, with nvidia-smi's memory.
	wantGPU := gpu.Spec{Model: "H100-SXM", MemoryGiB: 79.6, PeakTFLOPS: 989, MemoryBandwidthTBPerS: 3.35, PeakFP8TFLOPS: 1979, PeakFP32TFLOPS: 494.7, SMs: 132}
	if gpuIsland.GPUsPerHost != 1 || gpuIsland.GPU != wantGPU || gpuIsland.PCIeGen != 5 {
		t.Errorf("GPU island: %d x %+v PCIe gen %d; want 1 x %+v gen 5", gpuIsland.GPUsPerHost, gpuIsland.GPU, gpuIsland.PCIeGen, wantGPU)
	}
	if cpu.GPUsPerHost != 2 || cpu.GPU.Model != CPUModel || cpu.GPU.PeakTFLOPS != DefaultCPUSlotTFLOPS ||
		cpu.GPU.MemoryGiB <= 0 || cpu.GPU.MemoryGiB > cpu.HostMemoryGiB/2 || len(cpu.Hosts) != 1 {
		t.Errorf("CPU island: %d x %+v, hosts %+v", cpu.GPUsPerHost, cpu.GPU, cpu.Hosts)
	}
	// The captured tree: hfi1_0:1 100G, mlx4_0:1+2 40G, mlx5_0:1 25G IB;
	// eth0 1G holds the host's address only when it is the SSH address,
	// which it is not here (no ip addr in the capture): no Ethernet NIC.
	wantNICs := []cluster.NICSpec{
		{Type: cluster.NICInfiniBand, Count: 1, RateGbitPerS: 100, Devices: []string{"hfi1_0:1"}},
		{Type: cluster.NICInfiniBand, Count: 2, RateGbitPerS: 40, Devices: []string{"mlx4_0:1", "mlx4_0:2"}},
		{Type: cluster.NICInfiniBand, Count: 1, RateGbitPerS: 25, Devices: []string{"mlx5_0:1"}},
	}
	if !reflect.DeepEqual(gpuIsland.NICs, wantNICs) {
		t.Errorf("NICs\n%+v\nwant\n%+v", gpuIsland.NICs, wantNICs)
	}
	if gpuIsland.HostMemoryGiB <= 0 || gpuIsland.CPUCores <= 0 || gpuIsland.IntraHost.Type != "pcie" {
		t.Errorf("host-level fields: mem %v cores %d bus %q", gpuIsland.HostMemoryGiB, gpuIsland.CPUCores, gpuIsland.IntraHost.Type)
	}

	// The planner reads the file back and resolves it (catalog, links).
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("probed file does not parse: %v\n%s", err, data)
	}
	c, err := back.Resolve()
	if err != nil {
		t.Fatalf("probed file does not resolve: %v\n%s", err, data)
	}
	if c.TotalGPUs() != 1+2+1 {
		t.Errorf("resolved cluster has %d GPUs/slots, want 4", c.TotalGPUs())
	}

	perHost, _, err := BuildClusterFile(probes, ClusterOptions{NProcPerNode: 2, Group: GroupPerHost})
	if err != nil || len(perHost.Clusters) != 3 {
		t.Errorf("per-host grouping: %v clusters, %v", len(perHost.Clusters), err)
	}
}

func TestBuildClusterFileUnknownGPUWarns(t *testing.T) {
	hp := &HostProbe{Target: "x1", GPUs: []GPU{{Name: "NVIDIA Quadro FX 580", MemoryMiB: 512}}, CPUCores: 4, MemoryBytes: 8 << 30}
	f, warnings, err := BuildClusterFile([]*HostProbe{hp}, ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "peak_bf16_tflops") {
		t.Errorf("warnings %q, want one asking for peak_bf16_tflops", warnings)
	}
	if g := f.Clusters[0].GPU; g.Model != "NVIDIA Quadro FX 580" || g.MemoryGiB != 0.5 {
		t.Errorf("unknown GPU written as %+v", g)
	}
}

func TestSplitBySpeed(t *testing.T) {
	probes := []*HostProbe{{Target: "a1"}, {Target: "a2"}, {Target: "b1"}, {Target: "b2"}, {Target: "c"}}
	// a1,a2 and b1,b2 fast inside (~10 Gbit/s), 0.1 between; c not measured.
	m := &cluster.MeasuredBandwidth{Hosts: []string{"a1", "a2", "b1", "b2"}, GbitPerS: [][]float64{
		{0, 9, 0.1, 0.1},
		{11, 0, 0.1, 0.1},
		{0.1, 0.1, 0, 7},
		{0.1, 0.1, 8, 0},
	}}
	got := splitBySpeed(probes, m, func(hp *HostProbe) string { return hp.Target })
	var names [][]string
	for _, g := range got {
		var l []string
		for _, hp := range g {
			l = append(l, hp.Target)
		}
		names = append(names, l)
	}
	want := [][]string{{"a1", "a2", "c"}, {"b1", "b2"}}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("islands %v, want %v", names, want)
	}
}
