package parallel

import (
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Constraints pin parts of the search space (user-fixed flags). Zero values
// leave a dimension free.
type Constraints struct {
	TP, PP, DP, CP, VPP, MicroBatch int
	// EP and ETP are the expert parallel and expert tensor parallel sizes
	// (0 = free; MoE models only).
	EP, ETP int
	// DeepSpeedMoE: the MoE layers are DeepSpeed's (Megatron-DeepSpeed's
	// --num-experts), whose groups.py carves the expert-parallel groups
	// out of the data-parallel ranks: EP consecutive ranks of a pipeline
	// stage with experts whole on each (ETP 1, TP x DP divisible by EP),
	// or with ExpertTP (--enable-expert-tensor-parallelism) EP ranks of
	// one TP rank's data-parallel group, experts split over TP (ETP = TP,
	// DP divisible by EP). Without it, a DeepSpeed plan of an MoE model is
	// refused: nothing would render its expert parallelism.
	DeepSpeedMoE, ExpertTP bool
	// MoEParamGroup: Megatron-DeepSpeed's --create-moe-param-group puts
	// the experts in optimizer groups of their own, which DeepSpeed's
	// ZeRO-1/2 need with MoE layers; without it only ZeRO stage 0 runs.
	MoEParamGroup bool
	// Ulysses: CP is DeepSpeed-Ulysses sequence parallelism
	// (Megatron-DeepSpeed's --ds-sequence-parallel-size), not Megatron-LM's
	// context parallelism; see Config.Ulysses.
	Ulysses   bool
	Recompute Recompute // "" = free
	ZeroStage int       // -1 = free
	// SequenceParallel nil is "auto": on wherever TP > 1 in Megatron (the
	// cost model prices it as never slower: the same bytes on the wire,
	// less element-wise work and activation memory).
	SequenceParallel *bool
	// Precision of the run: "" or bf16, fp16, fp8 (not searched: it
	// changes the numerics, so it is the user's choice).
	Precision gpu.Precision
	// LowPrecisionDP is the user's --fp8-param-gather and
	// --grad-reduce-in-bf16, copied into every config.
	LowPrecisionDP LowPrecisionDP
	// TPCommOverlap is the user's --tp-comm-overlap, copied into every
	// config (see Config.TPCommOverlap).
	TPCommOverlap bool
	// TPOverlapCfg is the userbuffers configuration the user's
	// --tp-comm-overlap-cfg names (nil: TE's defaults), copied with it.
	TPOverlapCfg         *TPOverlapCfg
	DistributedOptimizer *bool
	// NoOffload forbids CPU offload; ForceOffload asks for it.
	NoOffload, ForceOffload bool
	// StageLayers is the user's own layer split (decoder layers per stage,
	// stage = vpp_index*PP + pp_rank): only configs with PP*VPP stages are
	// tried, and the split is never rebalanced.
	StageLayers []int
}
