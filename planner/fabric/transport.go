package fabric

// Transport is how NCCL carries inter-host traffic for the whole job; the
// renderer sets the same per host (templates' --nccl-mode), so the planner
// prices the links the job will really use.
type Transport int

const (
	// TransportAuto: RDMA while every island shares one RDMA fabric (or
	// there is one island); otherwise TCP sockets on every rank, because a
	// communicator mixing transports hangs.
	TransportAuto Transport = iota
	// TransportSockets: TCP sockets on every rank.
	TransportSockets
	// TransportPerGroup: RDMA inside islands, sockets between them (Holmes).
	TransportPerGroup
	// TransportIslands: one network per communicator type (Megatron-Core's
	// --nccl-communicator-config-path): TP, CP and DP groups on RDMA inside
	// islands, pipeline send/recv and the embedding group on TCP sockets
	// everywhere once the job spans islands without a shared RDMA fabric
	// (one pipeline communicator carries every hop of a pipeline, and it
	// cannot mix transports). Like TransportAuto while the islands share
	// one fabric.
	TransportIslands
)
