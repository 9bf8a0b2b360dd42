package planner

import "time"

// Constraints pin parts of the search space (user-fixed flags). Zero values
// leave a dimension free.
type Constraints struct {
	TP, PP, DP, CP, VPP, MicroBatch int
	// EP and ETP are the expert parallel and expert tensor parallel sizes
	// (0 = free; MoE models only).
	EP, ETP   int
	Recompute Recompute // "" = free
	ZeroStage int       // -1 = free
	// SequenceParallel nil is "auto": on wherever TP > 1 in Megatron (the
	// cost model prices it as never slower: the same bytes on the wire,
	// less element-wise work and activation memory).
	SequenceParallel *bool
	// Precision of the run: "" or bf16, fp16, fp8 (not searched: it
	// changes the numerics, so it is the user's choice).
	Precision            Precision
	DistributedOptimizer *bool
	// NoOffload forbids CPU offload; ForceOffload asks for it.
	NoOffload, ForceOffload bool
	// StageLayers is the user's own layer split (decoder layers per stage,
	// stage = vpp_index*PP + pp_rank): only configs with PP*VPP stages are
	// tried, and the split is never rebalanced.
	StageLayers []int
}

// SearchOptions are the inputs of Search besides the cluster and model.
type SearchOptions struct {
	Framework   Framework
	GlobalBatch int
	Fixed       Constraints
	// TopK plans are returned, best first (default 10).
	TopK int
	// Seed makes placement deterministic.
	Seed int64
	// PlacementBudget bounds the placement optimiser per candidate.
	PlacementBudget time.Duration
	// IgnoreIslands plans as if the cluster were one flat fabric (for the
	// comparison row in the plan table); the prediction still uses real links.
	IgnoreIslands bool
	// HostOrder, with IgnoreIslands, is the host order ranks fill in
	// torchrun's way (rank r on the r/GPUs-th host of the order): the
	// user's own layout for `plan --as-is`. Nil is the cluster's order.
	HostOrder []int
}

// NewCluster builds a resolved cluster from hosts and a full host-to-host
// bandwidth (bytes/s) and latency (s) matrix. Islands are derived from
// Host.Island. It is how tests and the YAML resolver construct clusters.
func NewCluster(islands []Island, hosts []Host, bwBytesPerS, latencyS [][]float64) *Cluster {
	return &Cluster{Islands: islands, Hosts: hosts, bw: bwBytesPerS, lat: latencyS}
}
