// Package planner turns a cluster description and a model shape into ranked
// training plans. It is the planning API (request in, ranked plans out); the
// stages live in its sub-packages, each pure Go with no I/O (callers pass
// bytes and get values). Each imports only the layers below it
// (internal/archtest checks it; docs/architecture.md explains the map):
//
//	0  gpu, schedule        GPU catalog and efficiency curves; pipeline schedule simulator, layer split
//	1  model, parallel      model shape; the search-space point (Config) and the user's pins (Constraints)
//	2  fabric               --nccl-mode, NCCL transport, which islands share an RDMA fabric
//	3  cluster, megatron    cluster file and its links, calibration; Megatron arguments: parse, read, check
//	4  memory, deepspeed    per-GPU/host memory and offload estimate; DeepSpeed config: read, check
//	4  calibration          fitting calibration factors to the iteration times of real runs
//	5  search               cost evaluator, search over TP/PP/DP/CP/..., placement, timeline
//
// Nothing under planner/ imports templates/, launcher/ or cmd/.
package planner
