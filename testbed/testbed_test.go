package testbed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sshOut(t *testing.T, tb *Testbed, host string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", append(tb.SSHArgs(host), cmd...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh %s %v: %v: %s", host, cmd, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestUpSSHHostnameTmpAndRDMA(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{
		{Name: "ib1", RDMA: RDMAInfiniBand, RateGbitPerS: 200},
		{Name: "roce1", RDMA: RDMARoCE, RateGbitPerS: 100},
		{Name: "eth1"},
	}})
	for _, h := range tb.Hosts {
		if got := sshOut(t, tb, h.Name, "hostname"); got != h.Name {
			t.Errorf("ssh %s hostname = %q, want %q", h.Name, got, h.Name)
		}
	}
	// by address too: known_hosts holds the key under both
	if got := sshOut(t, tb, tb.Hosts[0].Addr, "hostname"); got != "ib1" {
		t.Errorf("ssh by address: hostname = %q, want ib1", got)
	}
	sshOut(t, tb, "ib1", "echo secret > /tmp/only-on-ib1")
	if got := sshOut(t, tb, "ib1", "cat /tmp/only-on-ib1"); got != "secret" {
		t.Errorf("ib1 /tmp file = %q", got)
	}
	if got := sshOut(t, tb, "eth1", "test -e /tmp/only-on-ib1 && echo present || echo absent"); got != "absent" {
		t.Errorf("eth1 sees ib1's /tmp file: %q", got)
	}
	if _, err := os.Stat("/tmp/only-on-ib1"); err == nil {
		t.Errorf("machine's /tmp sees host file")
	}
	rdma := []struct {
		host, linkLayer, rate string
	}{
		{"ib1", "InfiniBand", "200 Gb/sec (4X HDR)"},
		{"roce1", "Ethernet", "100 Gb/sec (4X EDR)"},
		{"eth1", "", ""},
	}
	for _, c := range rdma {
		got := sshOut(t, tb, c.host, "cat /sys/class/infiniband/mlx5_0/ports/1/link_layer 2>/dev/null; cat /sys/class/infiniband/mlx5_0/ports/1/rate 2>/dev/null; true")
		want := strings.TrimSpace(c.linkLayer + "\n" + c.rate)
		if got != want {
			t.Errorf("%s: link_layer+rate = %q, want %q", c.host, got, want)
		}
		// the host's own interfaces show through its private /sys/class
		if got := sshOut(t, tb, c.host, "ls /sys/class/net | tr '\\n' ' '"); got != "eth0 lo" {
			t.Errorf("%s: /sys/class/net = %q, want \"eth0 lo\"", c.host, got)
		}
	}
	if got := sshOut(t, tb, "roce1", "cat /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3 /sys/class/infiniband/mlx5_0/device/net/eth0/operstate"); got != "RoCE v2\nup" {
		t.Errorf("roce1 gid type 3 + netdev state = %q", got)
	}
}

func TestSmoke(t *testing.T) {
	_ = filepath.Join
}
