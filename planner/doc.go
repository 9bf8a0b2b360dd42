// Package planner turns a cluster description and a model shape into ranked
// training plans. It is the planning API (request in, ranked plans out); the
// stages live in its sub-packages, each pure Go with no I/O (callers pass
// bytes and get values), importing only packages below it:
//
//	gpu, fabric                 GPU catalog and efficiency curves; NCCL transport
//	model, parallel             model shape; the search-space point (Config, Constraints)
//	cluster                     cluster file, resolution into links, calibration
//	megatron, deepspeed         framework arguments read into a model and constraints; validation
//	memory, schedule            per-GPU/host memory estimate; pipeline schedule simulator
//	search                      cost evaluator, search over TP/PP/DP/CP/..., placement
//
// Nothing under planner/ imports templates/, launcher/ or cmd/.
package planner
