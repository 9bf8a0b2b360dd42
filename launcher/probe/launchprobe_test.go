package probe

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
)

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
	s := probeMarker + " hostname\nnode2\n" + probeMarker + " ssh_connection\n" + sshConn + "\n"
	if ipaddr != "" {
		s += probeMarker + " ipaddr\n" + ipaddr + "\n"
	} else {
		s += probeMarker + " noip\n"
	}
	if route != "" {
		s += probeMarker + " route\n" + route + "\n"
	}
	if python != "" {
		s += probeMarker + " python\n" + python + "\n"
	}
	return s + probeMarker + " end\n"
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
			got, master, err := ParseLaunchProbe(tc.out, tc.masterAddr)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || master != tc.wantMaster {
				t.Errorf("got %+v master %q\nwant %+v master %q", got, master, tc.want, tc.wantMaster)
			}
		})
	}
	if _, _, err := ParseLaunchProbe("::pipette-probe:: hostname\nx\n", ""); err == nil {
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
	out, stderr, err := r.Run(context.Background(), launchProbeCommand("", self))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	hr, master, err := ParseLaunchProbe(string(out), "")
	if err != nil {
		t.Fatal(err)
	}
	if hn, _ := os.Hostname(); hr.Hostname != hn || !hr.PythonFound {
		t.Errorf("hostname %q (want %q), executable found %v (want true)", hr.Hostname, hn, hr.PythonFound)
	}
	if master == "" || hr.Ifname == "" || master == "127.0.0.1" {
		t.Fatalf("master %q on %q: want this machine's first global address and its interface\n%s", master, hr.Ifname, out)
	}
	out, stderr, err = r.Run(context.Background(), launchProbeCommand(master, "/nonexistent/python3"))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	other, _, err := ParseLaunchProbe(string(out), master)
	if err != nil {
		t.Fatal(err)
	}
	if other.Ifname != hr.Ifname || other.PythonFound {
		t.Errorf("towards %s: interface %q (want %q), python found %v (want false)", master, other.Ifname, hr.Ifname, other.PythonFound)
	}
}
