package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
)

func runProbeScript(t *testing.T, root string, env ...string) string {
	t.Helper()
	out, stderr, err := remotetest.Shell{Env: env}.Run(context.Background(), probeCommandAt(root))
	if err != nil {
		t.Fatalf("probe script: %v\n%s", err, stderr)
	}
	return string(out)
}

// The script run by a real sh over the captured sysfs tree must report the
// same ports as reading the tree directly.
func TestProbeScriptOnSysfsCapture(t *testing.T) {
	root, err := filepath.Abs(sysfsFixture)
	if err != nil {
		t.Fatal(err)
	}
	po, err := SplitOutput(runProbeScript(t, root))
	if err != nil {
		t.Fatal(err)
	}
	if got := RDMAPorts(po.view); !reflect.DeepEqual(got, wantFixtureRDMA) {
		t.Errorf("RDMA ports from the script:\n%+v\nwant\n%+v", got, wantFixtureRDMA)
	}
	if got := EthernetNICs(po.view, nil, "eth0"); !reflect.DeepEqual(got, []NIC{wantFixtureEth}) {
		t.Errorf("Ethernet from the script: %+v, want %+v", got, wantFixtureEth)
	}
}

// On this machine: hostname, memory and CPUs agree with what Go reads, and
// no nvidia-smi means zero GPUs.
func TestProbeScriptOnThisMachine(t *testing.T) {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Skip("this machine has nvidia-smi; the test checks the GPU-less path")
	}
	hp, err := ParseProbeOutput(runProbeScript(t, "", "SSH_CONNECTION="))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if hp.Hostname != host {
		t.Errorf("hostname %q, want %q", hp.Hostname, host)
	}
	meminfo, _ := os.ReadFile("/proc/meminfo")
	if want, _ := ParseMemTotal(string(meminfo)); hp.MemoryBytes != want || want == 0 {
		t.Errorf("memory %d, want %d", hp.MemoryBytes, want)
	}
	if hp.CPUCores != runtime.NumCPU() {
		t.Errorf("CPU cores %d, want %d", hp.CPUCores, runtime.NumCPU())
	}
	if len(hp.GPUs) != 0 {
		t.Errorf("GPUs %+v without nvidia-smi", hp.GPUs)
	}
	for _, n := range hp.NICs {
		if n.Name == "lo" {
			t.Error("loopback listed as a NIC")
		}
	}
}

// fakeNvidiaSMI puts an nvidia-smi on PATH that replays real captures (or
// fails like a host whose driver is not loaded).
func fakeNvidiaSMI(t *testing.T, capture string, fail bool) string {
	t.Helper()
	dir := t.TempDir()
	abs, _ := filepath.Abs(filepath.Join("testdata", "nvidia-smi", capture))
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
  --query-gpu=*) cat '%s.query-gpu.csv' ;;
  topo) cat '%s.topo-m.txt' ;;
  -L) cat '%s.L.txt' ;;
esac
`, abs, abs, abs)
	if strings.HasSuffix(capture, "+old") {
		// An nvidia-smi that rejects the query (as an old one rejects an
		// unknown field) but lists GPUs.
		abs = strings.TrimSuffix(abs, "+old")
		script = fmt.Sprintf("#!/bin/sh\ncase \"$1\" in\n  -L) cat '%s.L.txt' ;;\n  *) echo 'Field \"pcie.link.gen.max\" is not a valid field to query.'; exit 2 ;;\nesac\n", abs)
	}
	if fail {
		script = "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"\nexit 9\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return "PATH=" + dir + ":" + os.Getenv("PATH")
}

func TestProbeScriptGPUs(t *testing.T) {
	hp, err := ParseProbeOutput(runProbeScript(t, "", fakeNvidiaSMI(t, "nvidia-h100-80gb-hbm3", false),
		"SSH_CONNECTION=198.18.0.1 40000 198.18.0.11 22"))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{0, "NVIDIA H100 80GB HBM3", 81559, "00000000:00:09.0", 5}}
	if !reflect.DeepEqual(hp.GPUs, want) {
		t.Errorf("GPUs %+v, want %+v", hp.GPUs, want)
	}
	if hp.Topology == nil || hp.Topology.CPUAffinity["GPU0"] != "0-19" {
		t.Errorf("topology %+v", hp.Topology)
	}
	if hp.Addr != "198.18.0.11" {
		t.Errorf("address %q, want the SSH_CONNECTION server address", hp.Addr)
	}

	hp, err = ParseProbeOutput(runProbeScript(t, "", fakeNvidiaSMI(t, "nvidia-l40s+old", false)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []GPU{{Index: 0, Name: "NVIDIA L40S"}}; !reflect.DeepEqual(hp.GPUs, want) || len(hp.Warnings) != 1 {
		t.Errorf("query rejected: GPUs %+v warnings %q; want %+v from -L and one warning", hp.GPUs, hp.Warnings, want)
	}

	hp, err = ParseProbeOutput(runProbeScript(t, "", fakeNvidiaSMI(t, "", true)))
	if err != nil {
		t.Fatal(err)
	}
	if len(hp.GPUs) != 0 || len(hp.Warnings) != 1 || !strings.Contains(hp.Warnings[0], "exit 9") {
		t.Errorf("failing nvidia-smi: GPUs %+v warnings %q; want none and one warning", hp.GPUs, hp.Warnings)
	}
}

func TestSplitProbeOutputTruncated(t *testing.T) {
	if _, err := ParseProbeOutput(probeMarker + " hostname\nnode1\n"); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("err = %v, want incomplete output", err)
	}
}

func TestParseIPAddrAndReachAddress(t *testing.T) {
	out := "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n" +
		"2: eth0@if7    inet 198.18.0.11/24 brd 198.18.0.255 scope global eth0\\       valid_lft forever preferred_lft forever\n" +
		"3: ib0    inet 10.1.0.5/16 brd 10.1.255.255 scope global ib0\\       valid_lft forever preferred_lft forever\n"
	addrs, err := ParseIPAddr(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 3 || addrs[1].Iface != "eth0" || addrs[1].Prefix != 24 || addrs[1].Scope != "global" {
		t.Fatalf("addrs %+v", addrs)
	}
	for _, tc := range []struct{ conn, addr, iface string }{
		{"198.18.0.1 5000 10.1.0.5 22", "10.1.0.5", "ib0"},
		{"127.0.0.1 5000 127.0.0.1 22", "198.18.0.11", "eth0"},
		{"", "198.18.0.11", "eth0"},
	} {
		addr, iface := ReachAddress(tc.conn, addrs)
		if addr != tc.addr || iface != tc.iface {
			t.Errorf("ReachAddress(%q) = %s %s, want %s %s", tc.conn, addr, iface, tc.addr, tc.iface)
		}
	}
}
