package megatron

import (
	"strconv"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// RecomputeArgs are the Megatron-LM flags that realise recompute r (none
// for RecomputeNone). Full recompute is uniform over chunks of one layer,
// which recomputes every layer from its input: the memory the estimator
// assumes for it. The renderer writes them, and the launch's warning of
// what a plan turns on names them.
func RecomputeArgs(r parallel.Recompute) []string {
	switch r {
	case parallel.RecomputeSelective:
		return []string{"--recompute-granularity", "selective"}
	case parallel.RecomputeFull:
		return []string{"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}
	}
	return nil
}

// OffloadArgs are the Megatron-LM flags that offload this fraction of the
// optimizer to the CPU (Megatron's offload needs the precision-aware
// optimizer, and the distributed optimizer it lives in, rendered apart).
func OffloadArgs(fraction float64) []string {
	return []string{"--optimizer-cpu-offload", "--use-precision-aware-optimizer",
		"--optimizer-offload-fraction", strconv.FormatFloat(fraction, 'f', -1, 64),
		"--overlap-cpu-optimizer-d2h-h2d"}
}
