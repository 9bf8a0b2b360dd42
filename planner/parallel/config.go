package parallel

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Recompute is the activation recomputation mode.
type Recompute string

const (
	RecomputeNone      Recompute = "none"
	RecomputeSelective Recompute = "selective"
	RecomputeFull      Recompute = "full"
)

// Framework is the training framework a plan is for; it decides which
// options exist (ZeRO-2/3 only in DeepSpeed, the distributed optimizer and
// interleaving only in Megatron-LM).
type Framework string

const (
	FrameworkMegatron  Framework = "megatron"
	FrameworkDeepSpeed Framework = "deepspeed"
	FrameworkTorch     Framework = "torch"
)

// Offload is how much state lives in host memory.
type Offload struct {
	// OptimizerFraction of the optimizer states (and their update) on CPU.
	OptimizerFraction float64 `json:"optimizer_fraction"`
	// Params: ZeRO-3 parameters offloaded to CPU.
	Params bool `json:"params"`
}

// Config is one point of the search space.
type Config struct {
	TP int `json:"tp"`
	PP int `json:"pp"`
	DP int `json:"dp"`
	CP int `json:"cp"`
	// EP is the expert parallel size and ETP the expert tensor parallel
	// size of an MoE model's expert layers (0 = 1 and TP: dense models).
	// Experts are laid out over the same ranks as TP x CP x DP, so EP does
	// not change the world size: expert-DP = world / (ETP x EP x PP).
	EP  int `json:"ep,omitempty"`
	ETP int `json:"etp,omitempty"`
	// DropTokensTP: DeepSpeed's MoE layer with whole experts (ETP 1) and
	// TP > 1 (Megatron-DeepSpeed without --enable-expert-tensor-parallelism):
	// every TP rank keeps 1/TP of the dispatched tokens (sharded_moe.py
	// drop_tokens) and all-gathers the expert output over TP afterwards
	// (gather_tokens), so the experts see the tokens split as with
	// sequence parallelism.
	DropTokensTP bool `json:"drop_tokens_tp,omitempty"`
	// Ulysses: the CP ranks are DeepSpeed-Ulysses sequence parallelism
	// (Megatron-DeepSpeed's --ds-sequence-parallel-size CP). Like context
	// parallelism they split each sequence and stand outside DP (world =
	// TP x PP x SP x DP, Megatron-DeepSpeed's validate_args) with ZeRO
	// sharding over DP x SP (DeepSpeed's sequence-data-parallel group);
	// attention exchanges Q, K, V and its output by all-to-all instead of
	// passing K, V around a ring.
	Ulysses              bool      `json:"ulysses,omitempty"`
	VPP                  int       `json:"vpp"` // virtual stages per pipeline rank; 1 = plain 1F1B
	MicroBatch           int       `json:"micro_batch_size"`
	GlobalBatch          int       `json:"global_batch_size"`
	NumMicroBatches      int       `json:"num_micro_batches"`
	SequenceParallel     bool      `json:"sequence_parallel"`
	Recompute            Recompute `json:"recompute"`
	ZeroStage            int       `json:"zero_stage"`
	DistributedOptimizer bool      `json:"distributed_optimizer"`
	Offload              Offload   `json:"offload"`
	// Precision is "" (= bf16), bf16, fp16 or fp8.
	Precision gpu.Precision `json:"precision,omitempty"`
	// LowPrecisionDP is how Megatron-LM's data-parallel buffers and
	// traffic are typed (the user's flags; never searched).
	LowPrecisionDP
	// TPCommOverlap is the user's --tp-comm-overlap (never searched):
	// Transformer Engine's userbuffers pipeline each TP all-gather and
	// reduce-scatter with the GEMM beside it, so only the communication
	// longer than the GEMMs is exposed. Megatron requires sequence
	// parallelism with it (and so TP > 1).
	TPCommOverlap bool `json:"tp_comm_overlap,omitempty"`
	// TPOverlapCfg is the userbuffers configuration --tp-comm-overlap runs
	// with (Megatron-LM's --tp-comm-overlap-cfg, Megatron-Bridge's
	// tp_comm_overlap_cfg); nil: Transformer Engine's defaults (see
	// TPOverlap). Shared, never modified.
	TPOverlapCfg *TPOverlapCfg `json:"tp_comm_overlap_cfg,omitempty"`
	// StageLayers[i] is the decoder layers of pipeline stage i (PP*VPP
	// entries, stage i = vpp_index*PP + pp_rank as in Megatron's layout).
	StageLayers []int `json:"stage_layers"`
}

// SetFixedFlags copies into c the settings of fx that every config of a
// search shares, priced but never searched: low-precision DP reductions,
// --tp-comm-overlap and its userbuffers configuration. One place, so a
// setting added to both types is carried wherever a config is built.
func (c *Config) SetFixedFlags(fx Constraints) {
	c.LowPrecisionDP, c.TPCommOverlap, c.TPOverlapCfg = fx.LowPrecisionDP, fx.TPCommOverlap, fx.TPOverlapCfg
}

// TPOverlap is the userbuffers configuration of --tp-comm-overlap: the
// one given, else Transformer Engine's defaults.
func (c Config) TPOverlap() TPOverlapCfg {
	if c.TPOverlapCfg != nil {
		return *c.TPOverlapCfg
	}
	return DefaultTPOverlap()
}

// ExpertParallel returns EP and ETP with their defaults (1 and TP).
func (c Config) ExpertParallel() (ep, etp int) {
	ep, etp = max(c.EP, 1), c.ETP
	if etp < 1 {
		etp = max(c.TP, 1)
	}
	return ep, etp
}

// ExpertDP is the expert data-parallel size Megatron's parallel_state
// derives: world / (ETP x EP x PP).
func (c Config) ExpertDP() int {
	ep, etp := c.ExpertParallel()
	return max(1, c.WorldSize()/(etp*ep*max(c.PP, 1)))
}

// WorldSize is the number of ranks the config needs.
func (c Config) WorldSize() int { return c.TP * c.PP * c.DP * c.CP }

// UsesOffload reports whether the config keeps any state in host memory.
func (c Config) UsesOffload() bool { return c.Offload != (Offload{}) }

// OffloadLabel says what a config keeps in host memory ("-" for nothing):
// "opt 100%+params" is every optimizer state and the parameters.
func (c Config) OffloadLabel() string {
	o := c.Offload
	if o == (Offload{}) {
		return "-"
	}
	s := fmt.Sprintf("opt %.0f%%", 100*o.OptimizerFraction)
	if o.Params {
		s += "+params"
	}
	return s
}

// LowPrecisionDP are Megatron-LM's flags that narrow the distributed
// optimizer's buffers and traffic (arguments.py): they change the numerics,
// so only the user turns them on, and the planner prices what they save.
type LowPrecisionDP struct {
	// FP8ParamGather (--fp8-param-gather, FP8 runs with the distributed
	// optimizer): Transformer Engine keeps the GEMM weights in FP8 only
	// (no bf16 copy beside the FP8 one), and the parameter all-gather moves
	// FP8.
	FP8ParamGather bool `json:"fp8_param_gather,omitempty"`
	// GradReduceBF16 (--grad-reduce-in-bf16): gradients are accumulated
	// and reduced in bf16 (arguments.py turns accumulate_allreduce_grads_in_fp32
	// off), half the fp32 default's buffer and reduce-scatter bytes.
	GradReduceBF16 bool `json:"grad_reduce_in_bf16,omitempty"`
	// PrecisionAware is --use-precision-aware-optimizer with its dtype
	// flags (distributed optimizer only; nil: off).
	PrecisionAware *PrecisionAwareOptimizer `json:"precision_aware_optimizer,omitempty"`
}

// PrecisionAwareOptimizer is Megatron-LM's --use-precision-aware-optimizer
// (core_v0.19.0, megatron/core/optimizer/optimizer_config.py and
// distrib_optimizer.py): Transformer Engine's FusedAdam holds the
// optimizer state in the dtypes the flags give. With bf16 parameters and
// fp32 main parameters it keeps only the 16 low bits of each fp32 master
// weight, the high 16 being the bf16 parameter itself (store_param_remainders,
// on by default from TE 2.1: an int16 shard), unless MCore keeps the fp32
// masters itself (an FP8 run under a recipe other than delayed scaling).
type PrecisionAwareOptimizer struct {
	// MainParamsFP16 is --main-params-dtype fp16.
	MainParamsFP16 bool `json:"main_params_fp16,omitempty"`
	// MainGradsBF16 is --main-grads-dtype bf16: with --bf16 the gradient
	// buffer is then bf16 (arguments.py leaves
	// accumulate_allreduce_grads_in_fp32 off).
	MainGradsBF16 bool `json:"main_grads_bf16,omitempty"`
	// ExpAvgBytes and ExpAvgSqBytes are --exp-avg-dtype and
	// --exp-avg-sq-dtype as bytes per element (fp32 4, fp16/bf16 2, fp8 1).
	ExpAvgBytes   float64 `json:"exp_avg_bytes"`
	ExpAvgSqBytes float64 `json:"exp_avg_sq_bytes"`
}

// MegatronGradBytes is the bytes of one gradient element in Megatron-LM's
// gradient buffer and its data-parallel reduction: fp32 (with --bf16
// Megatron accumulates and reduces in fp32), bf16 with --grad-reduce-in-bf16.
func (c Config) MegatronGradBytes() float64 {
	if c.GradReduceBF16 || (c.PrecisionAware != nil && c.PrecisionAware.MainGradsBF16) {
		return 2
	}
	return 4
}

// MegatronOptimizerBytes is the optimizer state of one parameter under
// Megatron-LM's Adam, before the distributed optimizer shards it: fp32
// master weight and two fp32 moments (12 B); in fp32 the weights are the
// masters, so only the moments (8 B). With the precision-aware optimizer,
// the master and moments take the dtypes its flags give, and a bf16 run's
// fp32 master is stored as its 2-byte remainder.
func (c Config) MegatronOptimizerBytes() float64 {
	if c.Precision == gpu.PrecisionFP32 {
		return 8
	}
	pa := c.PrecisionAware
	if pa == nil || !c.DistributedOptimizer {
		return 12
	}
	master := 4.0
	switch {
	case pa.MainParamsFP16:
		master = 2
	case c.Precision != gpu.PrecisionFP16:
		// bf16 parameters (FP8 runs keep bf16 parameters too): TE stores
		// the remainder. The planner's FP8 is delayed scaling (--fp8-format
		// hybrid with an amax history), under which TE, not MCore, keeps
		// the masters (use_precision_aware_optimizer_no_fp8_or_ds_fp8).
		master = 2
	}
	return master + orFP32(pa.ExpAvgBytes) + orFP32(pa.ExpAvgSqBytes)
}

// orFP32 is b, or 4 (fp32) when unset.
func orFP32(b float64) float64 {
	if b <= 0 {
		return 4
	}
	return b
}

// ParamGatherBytes is the bytes per parameter the distributed optimizer's
// all-gather moves: the training precision's, 1 (FP8) with
// --fp8-param-gather in an FP8 run.
func (c Config) ParamGatherBytes() float64 {
	if c.FP8ParamGather && c.Precision == gpu.PrecisionFP8 {
		return 1
	}
	return gpu.ElemBytes(c.Precision)
}
