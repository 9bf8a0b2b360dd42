package launchprobe

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// The launcher reaches test-bed hosts directly, so the connection shows
// rank 0's address before any host runs the probe and every host probes
// in one round: what rank 0's host reports must be that address, and every
// other host's route to it must leave from its own address. Each host's
// probe session then stands by in the pool for the launch.
func TestProbeLaunchTestbed(t *testing.T) {
	tb := testbed.New(t, testbed.Spec{Hosts: []testbed.HostSpec{{Name: "lp1"}, {Name: "lp2"}, {Name: "lp3"}}})
	pool := remote.NewPool(remotetest.SSH(tb), 0)
	t.Cleanup(func() { pool.Close() })
	targets := remotetest.Targets(tb)
	for _, rank0 := range []int{0, 2} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds a hang: several ssh sessions share it on a busy CI machine
		lp, err := Hosts(ctx, pool, targets, rank0, "")
		cancel()
		if err != nil {
			t.Fatalf("rank 0 on %s: %v", tb.Hosts[rank0].Name, err)
		}
		want := tb.Hosts[rank0].Addr
		if got := pool.Conn(targets[rank0]).ReachedIPv4(); got != want {
			t.Errorf("rank 0 on %s: the connection shows %q, want %q", tb.Hosts[rank0].Name, got, want)
		}
		if lp.MasterAddr != want {
			t.Errorf("rank 0 on %s: MASTER_ADDR %q, want %q", tb.Hosts[rank0].Name, lp.MasterAddr, want)
		}
		for i, h := range tb.Hosts {
			if st := pool.TakeStandby(targets[i]); st == nil {
				t.Errorf("rank 0 on %s: host %s: no session stands by for the launch", tb.Hosts[rank0].Name, h.Name)
			} else {
				st.Close()
			}
			if hr := lp.Hosts[i]; hr.Hostname != h.Name || hr.Ifname == "" || hr.Src != h.Addr || hr.Problem != "" {
				t.Errorf("rank 0 on %s: host %s: %+v, want its own address %s on an interface", tb.Hosts[rank0].Name, h.Name, hr, h.Addr)
			}
			if err := lp.Hosts[i].Health([]string{lp.Hosts[i].Ifname}, 0); err != nil {
				t.Errorf("rank 0 on %s: host %s: %v (links %+v)", tb.Hosts[rank0].Name, h.Name, err, lp.Hosts[i].Links)
			}
		}
	}
	// The health check reads the host's own sysfs (its network
	// namespace's): a second interface there, down, fails it when named.
	// (A test-bed host's /sys/class/net lists only lo and eth0, links into
	// its namespace's real /sys/devices: nic9 is linked in the same way.)
	if b, err := tb.Exec(context.Background(), "lp2", "ip", "link", "add", "nic9", "type", "veth", "peer", "name", "nic9p"); err != nil {
		t.Fatalf("add nic9 on lp2: %v %s", err, b)
	}
	if err := os.Symlink("../../devices/virtual/net/nic9", filepath.Join(tb.Dir, "host", "lp2", "class", "net", "nic9")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // bounds a hang: several ssh sessions share it on a busy CI machine
	defer cancel()
	lp, err := Hosts(ctx, pool, targets, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	err = lp.Hosts[1].Health([]string{lp.Hosts[1].Ifname, "nic9"}, 0)
	if want := "health check: link nic9 is down (state down, from sysfs)"; err == nil || err.Error() != want {
		t.Errorf("lp2 with nic9 down: Health = %v, want %q (links %+v)", err, want, lp.Hosts[1].Links)
	}
	if err := lp.Hosts[0].Health([]string{lp.Hosts[0].Ifname, "nic9"}, 0); err != nil {
		t.Errorf("lp1 has no nic9 (not judged): %v", err)
	}
	// The same check of one host alone over a new connection, as after a
	// rank failed there (CheckHost).
	for i, want := range []string{"", "health check: link nic9 is down (state down, from sysfs)"} {
		conn, err := remote.Dial(ctx, targets[i], remotetest.SSH(tb))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckHost(ctx, conn, lp.MasterAddr, Needs{Links: []string{"nic9"}})
		conn.Close()
		if (want == "") != (err == nil) || (err != nil && err.Error() != want) {
			t.Errorf("CheckHost on %s = %v, want %q", tb.Hosts[i].Name, err, want)
		}
	}
}
