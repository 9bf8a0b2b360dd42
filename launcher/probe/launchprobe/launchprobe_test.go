package launchprobe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
)

// marker starts each section line of a probe script's output, as the
// recorded outputs below hold it (launcher/probe's probeMarker: a change
// there fails these tests, which then parse no end marker).
const marker = "::pipette-probe::"

// Recorded on a test-bed host (198.18.0.12) asked for rank 0 at
// 198.18.0.11, and on a machine with a default route.
const (
	recordedIPAddr = `1: lo    inet 127.0.0.1/8 scope host lo\       valid_lft forever preferred_lft forever
2: eth0    inet 198.18.0.12/24 brd 198.18.0.255 scope global eth0\       valid_lft forever preferred_lft forever
3: ens5    inet 10.0.3.7/16 brd 10.0.255.255 scope global ens5\       valid_lft forever preferred_lft forever`
	recordedRouteDirect = `198.18.0.11 dev eth0 src 198.18.0.12 uid 0 \    cache `
	recordedRouteVia    = `10.1.2.3 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \    cache `
)

func launchOutput(sshConn, ipaddr, route, python string) string {
	s := marker + " hostname\nnode2\n" + marker + " ssh_connection\n" + sshConn + "\n"
	if ipaddr != "" {
		s += marker + " ipaddr\n" + ipaddr + "\n"
	} else {
		s += marker + " noip\n"
	}
	if route != "" {
		s += marker + " route\n" + route + "\n"
	}
	if python != "" {
		s += marker + " python\n" + python + "\n"
	}
	return s + marker + " end\n"
}

func TestParseLaunchProbe(t *testing.T) {
	for _, tc := range []struct {
		name       string
		out        string
		masterAddr string
		want       HostRoute
		wantMaster string
	}{
		{name: "rank 0's host: the SSH connection's address and its interface",
			out:  launchOutput("198.18.0.1 51234 10.0.3.7 22", recordedIPAddr, "", "yes"),
			want: HostRoute{Hostname: "node2", Ifname: "ens5", Src: "10.0.3.7", PythonFound: true}, wantMaster: "10.0.3.7"},
		{name: "rank 0's host reached over loopback: its first global address",
			out:  launchOutput("127.0.0.1 40000 127.0.0.1 22", recordedIPAddr, "", ""),
			want: HostRoute{Hostname: "node2", Ifname: "eth0", Src: "198.18.0.12"}, wantMaster: "198.18.0.12"},
		{name: "another host: the route's device", masterAddr: "198.18.0.11",
			out:  launchOutput("198.18.0.1 51234 198.18.0.12 22", recordedIPAddr, recordedRouteDirect, "no"),
			want: HostRoute{Hostname: "node2", Ifname: "eth0", Src: "198.18.0.12"}},
		{name: "through a gateway", masterAddr: "10.1.2.3",
			out:  launchOutput("", recordedIPAddr, recordedRouteVia, ""),
			want: HostRoute{Hostname: "node2", Ifname: "eth0", Src: "192.0.2.2"}},
		{name: "the host holds rank 0's address itself", masterAddr: "10.0.3.7",
			out:  launchOutput("", recordedIPAddr, "local 10.0.3.7 dev lo src 10.0.3.7 uid 0 \\    cache <local>", ""),
			want: HostRoute{Hostname: "node2", Ifname: "ens5", Src: "10.0.3.7"}},
		{name: "no route", masterAddr: "10.9.9.9",
			out:  launchOutput("", recordedIPAddr, "RTNETLINK answers: Network is unreachable", ""),
			want: HostRoute{Hostname: "node2", Problem: `no route to rank 0's host: ip route get says "RTNETLINK answers: Network is unreachable"`}},
		{name: "no ip command", masterAddr: "10.9.9.9",
			out:  launchOutput("", "", "", ""),
			want: HostRoute{Hostname: "node2", Problem: "`ip` (iproute2) is not installed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, master, err := ParseOutput(tc.out, tc.masterAddr)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || master != tc.wantMaster {
				t.Errorf("got %+v master %q\nwant %+v master %q", got, master, tc.want, tc.wantMaster)
			}
		})
	}
	if _, _, err := ParseOutput("::pipette-probe:: hostname\nx\n", ""); err == nil {
		t.Error("output without the end marker parsed")
	}
}

// TestLaunchProbeScriptHere runs the real script with this machine's sh and
// ip: rank 0 reached over loopback, then a route to 127.0.0.1 (held here).
func TestLaunchProbeScriptHere(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip missing: install the Debian package iproute2")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r := remotetest.Shell{Env: []string{"SSH_CONNECTION=127.0.0.1 40000 127.0.0.1 22"}}
	out, stderr, err := r.Run(context.Background(), command("", self))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	hr, master, err := ParseOutput(string(out), "")
	if err != nil {
		t.Fatal(err)
	}
	if hn, _ := os.Hostname(); hr.Hostname != hn || !hr.PythonFound {
		t.Errorf("hostname %q (want %q), executable found %v (want true)", hr.Hostname, hn, hr.PythonFound)
	}
	if master == "" || hr.Ifname == "" || master == "127.0.0.1" {
		t.Fatalf("master %q on %q: want this machine's first global address and its interface\n%s", master, hr.Ifname, out)
	}
	out, stderr, err = r.Run(context.Background(), command(master, "/nonexistent/python3"))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	other, _, err := ParseOutput(string(out), master)
	if err != nil {
		t.Fatal(err)
	}
	if other.Ifname != hr.Ifname || other.PythonFound {
		t.Errorf("towards %s: interface %q (want %q), python found %v (want false)", master, other.Ifname, hr.Ifname, other.PythonFound)
	}
	// The health check's links, read from this machine's sysfs: the
	// interface that reaches rank 0's address is there and up.
	up := false
	for _, l := range hr.Links {
		up = up || (l.Name == hr.Ifname && l.Active)
	}
	if err := CheckHost(context.Background(), r, master, Needs{}); err != nil {
		t.Errorf("CheckHost on this machine: %v", err)
	}
	if !up || hr.Health([]string{hr.Ifname}, 0) != nil {
		t.Errorf("interface %s not found up in sysfs: %+v", hr.Ifname, hr.Links)
	}
}

// TestLaunchProbeHealth (issue 30, item 2): the health check before a
// (re)start reads each link's state from the launch probe's sysfs dump
// (operstate, else carrier, as the full probe reads NICs) and the GPUs
// nvidia-smi -L lists: a named link that is down, or fewer GPUs than the
// host runs on, fails it; a link the probe did not find is not judged.
// recorded is a host whose launch probe answers out (err: the command
// failed there).
type recorded struct {
	out string
	err error
}

func (r recorded) Run(context.Context, string) ([]byte, []byte, error) {
	return []byte(r.out), []byte("sh: 1: cannot fork\n"), r.err
}

// TestCheckHostCommandFails: a host reached whose probe command fails
// fails its check, saying so with the command's stderr.
func TestCheckHostCommandFails(t *testing.T) {
	err := CheckHost(context.Background(), recorded{err: errors.New("exit status 2")}, "198.18.0.11", Needs{})
	if err == nil || !strings.Contains(err.Error(), "launch probe: exit status 2") || !strings.Contains(err.Error(), "cannot fork") {
		t.Errorf("CheckHost = %v, want the command's failure and its stderr", err)
	}
}

func TestLaunchProbeHealth(t *testing.T) {
	dump := func(ifc, operstate, carrier string) string {
		p := marker + " file /sys/class/net/" + ifc + "/"
		return p + "type\n1\n" + p + "operstate\n" + operstate + "\n" + p + "carrier\n" + carrier + "\n"
	}
	gpus := func(n int) string {
		s := marker + " gpulist\n"
		for i := range n {
			s += fmt.Sprintf("GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000%d)\n", i, i)
		}
		return s + marker + " gpulist_rc 0\n"
	}
	ibPort := marker + " file /sys/class/infiniband/mlx5_0/ports/1/link_layer\nInfiniBand\n" +
		marker + " file /sys/class/infiniband/mlx5_0/ports/1/state\n1: DOWN\n" +
		marker + " file /sys/class/infiniband/mlx5_0/ports/1/phys_state\n3: Disabled\n"
	for _, tc := range []struct {
		name  string
		dump  string
		links []string
		gpus  int
		want  string // "" healthy
	}{
		{name: "the job's interface up", dump: dump("eth0", "up", "1"), links: []string{"eth0"}},
		{name: "the job's interface down", dump: dump("eth0", "down", "0"), links: []string{"eth0"},
			want: "health check: link eth0 is down (state down, from sysfs)"},
		{name: "a virtual interface: unknown, carrier up", dump: dump("ib0", "unknown", "1"), links: []string{"ib0"}},
		{name: "the cluster file's RDMA port down", dump: dump("eth0", "up", "1") + ibPort, links: []string{"eth0", "mlx5_0:1"},
			want: "link mlx5_0:1 is down (state DOWN, from sysfs)"},
		{name: "a link not found is not judged", dump: dump("eth0", "up", "1"), links: []string{"ens5"}},
		{name: "every GPU visible", dump: gpus(4), gpus: 4},
		{name: "a GPU gone", dump: gpus(3), gpus: 4, want: "health check: 3 of its 4 GPUs visible (nvidia-smi -L)"},
		{name: "nvidia-smi failing: no GPU visible", dump: marker + " gpulist\nNVIDIA-SMI has failed\n" + marker + " gpulist_rc 9\n", gpus: 2,
			want: "0 of its 2 GPUs visible"},
		{name: "no nvidia-smi: not judged", gpus: 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := strings.Replace(launchOutput("", recordedIPAddr, recordedRouteDirect, ""), marker+" end", tc.dump+marker+" end", 1)
			hr, _, err := ParseOutput(out, "198.18.0.11")
			if err != nil {
				t.Fatal(err)
			}
			err = hr.Health(tc.links, tc.gpus)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Health = %v, want %q (links %+v, GPUs %v)", err, tc.want, hr.Links, hr.GPUs)
			}
			// The same check of the host alone, after a rank failed there.
			err = CheckHost(context.Background(), recorded{out: out}, "198.18.0.11", Needs{Links: tc.links, GPUs: tc.gpus})
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("CheckHost = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCheckLocal: the check of this machine after a failure, run here
// without SSH: loopback is up and, with nvidia-smi absent, GPUs are not
// judged; an nvidia-smi listing fewer GPUs than the job runs on (a
// recorded answer's lines) fails it, naming the count.
func TestCheckLocal(t *testing.T) {
	t.Setenv("PATH", t.TempDir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Fatal("this machine has nvidia-smi: the test counts on its absence")
	}
	if err := CheckLocal(context.Background(), Needs{Links: []string{"lo"}, GPUs: 2}); err != nil {
		t.Errorf("this machine: %v, want healthy", err)
	}
	bin := t.TempDir()
	smi := "#!/bin/sh\n[ \"$1\" = -L ] && echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)'\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(smi), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	err := CheckLocal(context.Background(), Needs{GPUs: 2})
	if want := "health check: 1 of its 2 GPUs visible (nvidia-smi -L)"; err == nil || err.Error() != want {
		t.Errorf("one GPU listed of 2: %v, want %q", err, want)
	}
}
