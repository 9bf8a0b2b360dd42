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
}
