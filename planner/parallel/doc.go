// Package parallel is one point of the planner's search space: the
// framework, the TP/PP/DP/CP/EP sizes, micro-batching, recomputation, ZeRO
// stage and offload of a training run (Config), and the user's pins on that
// space (Constraints). Every stage above it speaks in these types.
package parallel
