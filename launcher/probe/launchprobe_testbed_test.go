package probe

import (
	"context"
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
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		lp, err := ProbeLaunch(ctx, pool, targets, rank0, "")
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
		}
	}
}
