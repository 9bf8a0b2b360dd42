package search

import (
	"time"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Options are the inputs of Search besides the cluster and model.
type Options struct {
	Framework   parallel.Framework
	GlobalBatch int
	Fixed       parallel.Constraints
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
	// MemoryHeadroom is the share of every GPU's memory a plan must leave
	// free (0 <= h < 0.5; 0: none): see DefaultMemoryHeadroom.
	MemoryHeadroom float64
	// PrecisionFromArgs: Fixed.Precision comes from the Megatron arguments
	// (--fp8-format, --bf16, --fp16: run, plan --as-is), not from plan's
	// --precision, so an error names the flag to change there.
	PrecisionFromArgs bool
	// UseAllGPUs keeps the rule that a plan uses every GPU of the cluster
	// (or there is none); without it plans may leave whole hosts idle
	// (Plan.Idle says which and why).
	UseAllGPUs bool
	// beat, when > 0, is the iteration time a plan must beat to be worth
	// placing (the search on fewer hosts against the best plan so far).
	beat float64
	// noComparison skips the offload comparison row: a host prefix's
	// search (addFewerHosts) keeps only its plans.
	noComparison bool
}

// DefaultMemoryHeadroom is the launcher's --memory-headroom: plans keep 5%
// of each GPU's memory free beyond the estimate's own allowances. Plans at
// 99.9% of the estimate OOM in real jobs: the CUDA context and NCCL's
// buffers grow with every communicator a rank creates (NCCL_BUFFSIZE, 4 MiB
// per channel and peer by default, NCCL's environment documentation), and
// PyTorch's caching allocator reserves blocks it cannot reuse for other
// sizes (memory_reserved above memory_allocated, PyTorch's "CUDA semantics:
// memory management" notes), both workload-dependent. The estimate itself
// counts the median of what Sailor's 26 measured GH200 runs used beyond
// their tensors (4 GiB, planner/memory otherFixedBytes); the runs spread
// from 2.0 to 5.9 GiB around it, and 5% of an 80 GiB GPU (4 GiB) covers
// the largest excess measured (1.9 GiB) twice, for communicators and
// systems those runs did not have.
const DefaultMemoryHeadroom = 0.05
