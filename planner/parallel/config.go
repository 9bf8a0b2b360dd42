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
	// StageLayers[i] is the decoder layers of pipeline stage i (PP*VPP
	// entries, stage i = vpp_index*PP + pp_rank as in Megatron's layout).
	StageLayers []int `json:"stage_layers"`
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
