package probe

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// nvidiaFixtures are the real captures in testdata/nvidia-smi (see
// testdata/PROVENANCE.md) with the values they hold.
var nvidiaFixtures = []struct {
	file   string
	name   string
	memMiB int
	busID  string
	cpus   string
	gen    int
}{
	{"nvidia-h100-80gb-hbm3", "NVIDIA H100 80GB HBM3", 81559, "00000000:00:09.0", "0-19", 5},
	{"nvidia-h200", "NVIDIA H200", 143771, "00000000:83:00.0", "0-23", 5},
	{"nvidia-l40s", "NVIDIA L40S", 46068, "00000000:01:00.0", "0-7", 4},
	{"nvidia-geforce-rtx-4080-super", "NVIDIA GeForce RTX 4080 SUPER", 16376, "00000000:01:00.0", "0-15", 4},
}

func readTestdata(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseGPUQueryWideCSVCaptures(t *testing.T) {
	for _, f := range nvidiaFixtures {
		t.Run(f.file, func(t *testing.T) {
			gpus, err := ParseGPUQuery(readTestdata(t, "nvidia-smi", f.file+".query-gpu.csv"))
			if err != nil {
				t.Fatal(err)
			}
			want := []GPU{{Index: 0, Name: f.name, MemoryMiB: f.memMiB, BusID: f.busID, PCIeGenMax: f.gen}}
			if !reflect.DeepEqual(gpus, want) {
				t.Errorf("got %+v, want %+v", gpus, want)
			}
		})
	}
}

// The probe asks for noheader,nounits: the same values as the captures,
// four columns, no units. The rows below are the captures' values in that
// form (two GPUs, to check multi-row output).
func TestParseGPUQueryNoHeader(t *testing.T) {
	out := "0, NVIDIA H100 80GB HBM3, 81559, 00000000:00:09.0, 5\n1, NVIDIA H100 80GB HBM3, 81559, 00000000:00:0A.0, [N/A]\n"
	gpus, err := ParseGPUQuery(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{0, "NVIDIA H100 80GB HBM3", 81559, "00000000:00:09.0", 5},
		{1, "NVIDIA H100 80GB HBM3", 81559, "00000000:00:0A.0", 0},
	}
	if !reflect.DeepEqual(gpus, want) {
		t.Errorf("got %+v, want %+v", gpus, want)
	}
}

// nvidia-smi's warnings among the rows (exit status 0) are not GPUs and
// must not fail the host's probe.
func TestParseGPUQuerySkipsWarnings(t *testing.T) {
	out := "WARNING: infoROM is corrupted at gpu 0000:00:0A.0\n0, NVIDIA H100 80GB HBM3, 81559, 00000000:00:09.0, 5\n" +
		"1, NVIDIA H100 80GB HBM3, 81559, 00000000:00:0A.0, 5\nWarning: \"persistence mode\" is disabled, see docs\n"
	gpus, err := ParseGPUQuery(out)
	if err != nil || len(gpus) != 2 || gpus[1].Index != 1 {
		t.Fatalf("got %+v, %v; want the two GPUs", gpus, err)
	}
}

func TestParseGPUQueryErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bad memory", "0, NVIDIA H200, [N/A], 00000000:83:00.0", "memory.total"},
		{"short row", "0, NVIDIA H200", "missing memory.total"},
		{"bad index", "x, NVIDIA H200, 1, 0", "index"},
		{"header without column", "index, name\n0, NVIDIA H200", "memory.total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseGPUQuery(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want mention of %q", err, tc.want)
			}
		})
	}
	if gpus, err := ParseGPUQuery(""); err != nil || len(gpus) != 0 {
		t.Errorf("empty output: %v, %v; want no GPUs", gpus, err)
	}
}

func TestParseGPUListCaptures(t *testing.T) {
	for _, f := range nvidiaFixtures {
		t.Run(f.file, func(t *testing.T) {
			l, err := ParseGPUList(readTestdata(t, "nvidia-smi", f.file+".L.txt"))
			if err != nil {
				t.Fatal(err)
			}
			want := []GPUListEntry{{0, f.name, "GPU-00000000-0000-0000-0000-000000000000"}}
			if !reflect.DeepEqual(l, want) {
				t.Errorf("got %+v, want %+v", l, want)
			}
		})
	}
	if _, err := ParseGPUList("No devices were found\n"); err == nil {
		t.Error("want an error for an unexpected line")
	}
}

func TestParseTopologyCaptures(t *testing.T) {
	for _, f := range nvidiaFixtures {
		t.Run(f.file, func(t *testing.T) {
			raw := readTestdata(t, "nvidia-smi", f.file+".topo-m.txt")
			if !strings.Contains(raw, "\x1b[4m") {
				t.Fatal("capture lost its ANSI escapes; the test would not check stripping")
			}
			topo, err := ParseTopology(raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(topo.Devices, []string{"GPU0"}) {
				t.Errorf("devices %q, want [GPU0]", topo.Devices)
			}
			if got := topo.Link["GPU0"]["GPU0"]; got != "X" {
				t.Errorf("GPU0-GPU0 = %q, want X", got)
			}
			if got := topo.CPUAffinity["GPU0"]; got != f.cpus {
				t.Errorf("CPU affinity %q, want %q", got, f.cpus)
			}
			if got := topo.NUMAAffinity["GPU0"]; got != "0" {
				t.Errorf("NUMA affinity %q, want 0", got)
			}
			if len(topo.NearestNICs()) != 0 {
				t.Error("one GPU without NICs: want no NIC affinity")
			}
		})
	}
}

// A two-GPU, two-NIC matrix in nvidia-smi's layout (tab separated, ANSI
// underlined header, NIC Legend). Written for this test: the real captures
// have one GPU and no NIC.
const topoTwoGPUsTwoNICs = "\x1b[4m\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n" +
	"GPU0\t X \tNV18\tPIX\tSYS\t0-55\t0\t\tN/A\n" +
	"GPU1\tNV18\t X \tSYS\tPIX\t56-111\t1\t\tN/A\n" +
	"NIC0\tPIX\tSYS\t X \tSYS\n" +
	"NIC1\tSYS\tPIX\tSYS\t X \n\n" +
	"Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\n" +
	"NIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_3\n"

func TestParseTopologyNICAffinity(t *testing.T) {
	topo, err := ParseTopology(topoTwoGPUsTwoNICs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"GPU0", "GPU1", "NIC0", "NIC1"}; !reflect.DeepEqual(topo.Devices, want) {
		t.Errorf("devices %q, want %q", topo.Devices, want)
	}
	want := map[string][]string{"GPU0": {"mlx5_0"}, "GPU1": {"mlx5_3"}}
	if got := topo.NearestNICs(); !reflect.DeepEqual(got, want) {
		t.Errorf("nearest NICs %v, want %v", got, want)
	}
	hp := &HostProbe{GPUs: make([]GPU, 2), Topology: topo}
	if got := intraHostType(hp); got != "nvlink" {
		t.Errorf("two GPUs joined by NV18: intra-host %q, want nvlink", got)
	}
	if topo.CPUAffinity["GPU1"] != "56-111" || topo.NUMAAffinity["GPU1"] != "1" {
		t.Errorf("GPU1 affinity %q/%q", topo.CPUAffinity["GPU1"], topo.NUMAAffinity["GPU1"])
	}
}

func TestIntraHostType(t *testing.T) {
	matrix := func(links ...string) *Topology {
		// links fill the upper triangle of a 3-GPU matrix: 0-1, 0-2, 1-2.
		t := &Topology{Devices: []string{"GPU0", "GPU1", "GPU2"}, Link: map[string]map[string]string{}}
		for _, d := range t.Devices {
			t.Link[d] = map[string]string{d: "X"}
		}
		pairs := [][2]string{{"GPU0", "GPU1"}, {"GPU0", "GPU2"}, {"GPU1", "GPU2"}}
		for i, p := range pairs {
			t.Link[p[0]][p[1]], t.Link[p[1]][p[0]] = links[i], links[i]
		}
		return t
	}
	three := make([]GPU, 3)
	for _, tc := range []struct {
		name string
		hp   *HostProbe
		want string
	}{
		{"all NVLink", &HostProbe{GPUs: three, Topology: matrix("NV12", "NV12", "NV12")}, "nvswitch"},
		{"some NVLink", &HostProbe{GPUs: three, Topology: matrix("NV2", "SYS", "PIX")}, "nvlink"},
		{"PCIe", &HostProbe{GPUs: three, Topology: matrix("PIX", "SYS", "NODE")}, "pcie"},
		{"no matrix", &HostProbe{GPUs: three}, ""},
		{"one GPU", &HostProbe{GPUs: three[:1]}, "pcie"},
	} {
		if got := intraHostType(tc.hp); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
