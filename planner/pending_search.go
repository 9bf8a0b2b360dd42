package planner

// This file holds the signatures that the planner-search work implements
// (latency model, search, placement). The owner deletes it as they land.

import "errors"

// Search enumerates every config Megatron-LM (or DeepSpeed) would accept on
// the cluster, rejects those that do not fit in memory, predicts the rest,
// places the best and returns the TopK, fastest first. When nothing fits the
// error is a *NoFitError.
func Search(c *Cluster, m Model, o SearchOptions) (*Result, error) {
	return nil, errors.New("planner: not implemented yet (pending planner-search)")
}

// NoFitError says by how much the closest plan misses and what would help.
type NoFitError struct {
	BestMissBytes float64
	Suggestions   []string
	Message       string
}

func (e *NoFitError) Error() string { return e.Message }
