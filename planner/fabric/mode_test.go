package fabric

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

func TestSocketsOnly(t *testing.T) {
	ib := func(f string) Island { return Island{RDMA: true, Fabric: f} }
	eth := Island{}
	for _, tc := range []struct {
		name    string
		t       Transport
		islands []Island
		want    bool
	}{
		{"one rdma island", TransportAuto, []Island{ib("")}, false},
		{"one ethernet island", TransportAuto, []Island{eth}, false},
		{"two islands on one fabric", TransportAuto, []Island{ib("a"), ib("a")}, false},
		{"two islands on two fabrics", TransportAuto, []Island{ib("a"), ib("b")}, true},
		{"two unnamed rdma islands", TransportAuto, []Island{ib(""), ib("")}, true},
		{"rdma and ethernet", TransportAuto, []Island{ib("a"), eth}, true},
		{"forced sockets", TransportSockets, []Island{ib("a")}, true},
		{"per group keeps rdma inside", TransportPerGroup, []Island{ib("a"), eth}, false},
		{"islands keeps rdma inside", TransportIslands, []Island{ib("a"), ib("b")}, false},
	} {
		if got := SocketsOnly(tc.t, tc.islands); got != tc.want {
			t.Errorf("%s: SocketsOnly = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestModeTransport(t *testing.T) {
	for _, tc := range []struct {
		mode string
		fw   parallel.Framework
		want Transport
	}{
		{"", parallel.FrameworkMegatron, TransportIslands},
		{"auto", parallel.FrameworkDeepSpeed, TransportAuto},
		{"sockets", parallel.FrameworkMegatron, TransportSockets},
		{"per-group", parallel.FrameworkMegatron, TransportPerGroup},
	} {
		m, err := ParseMode(tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.TransportFor(tc.fw); got != tc.want {
			t.Errorf("--nccl-mode %q, %s: %v, want %v", tc.mode, tc.fw, got, tc.want)
		}
	}
	if _, err := ParseMode("rdma"); err == nil {
		t.Error("--nccl-mode rdma accepted")
	}
}

func TestDecide(t *testing.T) {
	ib := func(f string) Island { return Island{RDMA: true, Fabric: f} }
	eth := Island{}
	mega, ds := parallel.FrameworkMegatron, parallel.FrameworkDeepSpeed
	for _, tc := range []struct {
		name    string
		mode    Mode
		fw      parallel.Framework
		islands []Island
		want    Decision
		err     bool
	}{
		{"auto, one fabric", ModeAuto, mega, []Island{ib("a"), ib("a")}, Decision{}, false},
		{"auto, rdma islands apart", ModeAuto, mega, []Island{ib("a"), ib("b")}, Decision{PerCommunicator: true}, false},
		{"auto, rdma and ethernet", ModeAuto, ds, []Island{ib("a"), eth}, Decision{PerCommunicator: true}, false},
		{"auto, ethernet only", ModeAuto, mega, []Island{eth, eth}, Decision{Sockets: true, NoRDMA: true}, false},
		{"auto, one ethernet island", ModeAuto, mega, []Island{eth}, Decision{NoRDMA: true}, false},
		{"sockets", ModeSockets, mega, []Island{ib("a")}, Decision{Sockets: true}, false},
		{"per-group apart", ModePerGroup, mega, []Island{ib("a"), eth}, Decision{PerGroup: true}, false},
		{"per-group on one fabric", ModePerGroup, mega, []Island{ib("a")}, Decision{}, false},
		{"per-group needs megatron", ModePerGroup, ds, []Island{ib("a"), eth}, Decision{}, true},
	} {
		got, err := Decide(tc.mode, tc.fw, tc.islands)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("%s: %+v, %v; want %+v (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
