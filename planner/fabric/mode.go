package fabric

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Mode is how the NCCL transport is chosen for a job (--nccl-mode).
type Mode string

const (
	// ModeAuto uses each host's RDMA NICs while the job stays on one RDMA
	// fabric and TCP sockets on every rank once it spans islands without a
	// shared RDMA fabric (a communicator mixing transports hangs).
	ModeAuto Mode = "auto"
	// ModeSockets uses TCP sockets on every rank.
	ModeSockets Mode = "sockets"
	// ModePerGroup keeps RDMA inside islands and renders Holmes' flags so
	// its Megatron fork creates cross-island groups over sockets.
	ModePerGroup Mode = "per-group"
)

// ParseMode parses the --nccl-mode value ("" means auto).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeSockets, ModePerGroup:
		return m, nil
	}
	return "", fmt.Errorf("--nccl-mode %q: want auto, sockets or per-group", s)
}

// Transport is the planner's view of the mode, so plans are priced on the
// links the rendered NCCL settings will use.
func (m Mode) Transport() Transport {
	switch m {
	case ModeSockets:
		return TransportSockets
	case ModePerGroup:
		return TransportPerGroup
	}
	return TransportAuto
}

// TransportFor is the pricing of a job of framework f under the mode:
// auto prices Megatron jobs with one network per communicator type
// (TransportIslands), which rendering keeps unless the job cannot have it
// (templates.IslandsFallback says why); other frameworks run sockets
// across islands.
func (m Mode) TransportFor(f parallel.Framework) Transport {
	if (m == ModeAuto || m == "") && (f == parallel.FrameworkMegatron || f == "") {
		return TransportIslands
	}
	return m.Transport()
}

// Island is what the transport decision needs of one island of a job.
type Island struct {
	// RDMA: the island's hosts have InfiniBand or RoCE NICs.
	RDMA bool
	// Fabric names the RDMA fabric the island is on ("" = its own).
	Fabric string
}

// SharedRDMA reports whether the islands can all talk RDMA to each other
// (every one has RDMA, on one named fabric; a single RDMA island always
// can), and whether any of them has RDMA at all.
func SharedRDMA(islands []Island) (shared, anyRDMA bool) {
	shared = len(islands) > 0
	for i, is := range islands {
		anyRDMA = anyRDMA || is.RDMA
		if !is.RDMA || (i > 0 && (is.Fabric == "" || is.Fabric != islands[0].Fabric)) {
			shared = false
		}
	}
	return shared, anyRDMA
}

// SocketsOnly reports whether every rank uses TCP sockets under t: always
// for TransportSockets; under TransportAuto once the job spans islands
// without a shared RDMA fabric; never for the per-group transports (RDMA
// stays inside islands).
func SocketsOnly(t Transport, islands []Island) bool {
	switch t {
	case TransportSockets:
		return true
	case TransportPerGroup, TransportIslands:
		return false
	}
	shared, _ := SharedRDMA(islands)
	return len(islands) > 1 && !shared
}

// Decision is what a mode means for the islands a job uses.
type Decision struct {
	// Sockets: every rank uses TCP sockets.
	Sockets bool
	// PerGroup: RDMA inside islands and Holmes' cross-island groups over
	// sockets (the groups that cross islands must be pipeline groups).
	PerGroup bool
	// PerCommunicator: under auto, the job spans islands without a shared
	// RDMA fabric but has RDMA: each communicator type gets a network of
	// its own (RDMA inside islands, sockets across) where the job can have
	// it, else every rank falls back to sockets.
	PerCommunicator bool
	// NoRDMA: no island of the job has RDMA.
	NoRDMA bool
}

// Decide applies a mode to the islands a job of framework f uses.
func Decide(m Mode, f parallel.Framework, islands []Island) (Decision, error) {
	shared, anyRDMA := SharedRDMA(islands)
	d := Decision{NoRDMA: !anyRDMA}
	spans := len(islands) > 1 && !shared
	switch m {
	case ModeSockets:
		d.Sockets = true
	case ModePerGroup:
		if f != parallel.FrameworkMegatron {
			return d, fmt.Errorf("--nccl-mode per-group needs Holmes' Megatron fork (--framework megatron), not %s; use --nccl-mode sockets", f)
		}
		d.PerGroup = spans
	default:
		d.Sockets = spans && !anyRDMA
		d.PerCommunicator = spans && anyRDMA
	}
	return d, nil
}
