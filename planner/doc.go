// Package planner turns a cluster description and a model shape into ranked
// training plans: it estimates per-GPU and per-host memory, predicts the
// iteration time of 1F1B and interleaved pipeline schedules over the real
// (heterogeneous) links, searches TP/PP/DP/CP, micro-batch, virtual stages,
// recompute, ZeRO stage and CPU offload, and places ranks on hosts and GPUs.
//
// The package is pure Go and does no I/O: callers pass bytes and get values.
package planner
