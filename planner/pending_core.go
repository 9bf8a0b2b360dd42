package planner

// This file holds the signatures that the planner-core work implements
// (cluster and model parsing, memory estimation, offload cost). The owner
// deletes this file as real implementations land.

import "errors"

var errPendingCore = errors.New("planner: not implemented yet (pending planner-core)")




// EstimateStageMemory returns the per-GPU bytes of pipeline rank ppRank
// (0..PP-1) of cfg under framework f.
func EstimateStageMemory(m Model, cfg Config, f Framework, ppRank int) MemoryBreakdown {
	return MemoryBreakdown{}
}

// HostBytesPerNode is the host memory a node running ranksPerHost ranks of
// cfg needs (offloaded states, pinned buffers, per-process overhead).
func HostBytesPerNode(m Model, cfg Config, f Framework, ranksPerHost int) float64 { return 0 }

// OffloadCost is the per-iteration cost of CPU offload for one rank.
type OffloadCost struct {
	PCIeSeconds    float64 // gradients down + parameters up over PCIe
	CPUAdamSeconds float64 // optimizer step on the host's CPU
	// ExposedSeconds is what stays on the critical path after the overlap
	// the framework achieves.
	ExposedSeconds float64
}

// EstimateOffload returns the offload cost of cfg for one rank on host h
// shared by ranksPerHost ranks. Zero when cfg offloads nothing.
func EstimateOffload(m Model, cfg Config, f Framework, h Host, ranksPerHost int) OffloadCost {
	return OffloadCost{}
}
