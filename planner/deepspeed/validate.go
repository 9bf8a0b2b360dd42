package deepspeed

import (
	"errors"
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Validate is DeepSpeed's (Megatron-DeepSpeed's) subset: ZeRO-2/3
// do not combine with its pipeline engine, no interleaving, no CP.
func Validate(m model.Model, cfg parallel.Config, world int) error {
	c := cfg
	c.ZeroStage, c.DistributedOptimizer, c.Offload = 0, false, parallel.Offload{}
	if m.IsMoE() {
		// DeepSpeed's expert rules (validateMoE), not Megatron-Core's.
		c.EP, c.ETP = 1, 1
	}
	err := megatron.Validate(m, c, world)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if cfg.ZeroStage < 0 || cfg.ZeroStage > 3 {
		errs = append(errs, fmt.Errorf("zero stage %d outside 0..3", cfg.ZeroStage))
	}
	if cfg.ZeroStage >= 2 && cfg.PP > 1 {
		errs = append(errs, fmt.Errorf("DeepSpeed's pipeline engine supports ZeRO stage 0 or 1, not %d", cfg.ZeroStage))
	}
	if cfg.VPP > 1 || (cfg.CP > 1 && !cfg.Ulysses) || cfg.DistributedOptimizer {
		errs = append(errs, fmt.Errorf("DeepSpeed plans have no virtual stages, context parallelism or Megatron distributed optimizer"))
	}
	if cfg.Offload.OptimizerFraction > 0 && cfg.ZeroStage < 1 {
		errs = append(errs, fmt.Errorf("DeepSpeed optimizer offload needs ZeRO stage >= 1"))
	}
	if m.IsMoE() {
		errs = append(errs, validateMoE(m, cfg)...)
	}
	if cfg.Offload.Params && cfg.ZeroStage != 3 {
		errs = append(errs, fmt.Errorf("DeepSpeed parameter offload needs ZeRO stage 3"))
	}
	return errors.Join(errs...)
}

// validateMoE applies DeepSpeed v0.14.4's rules for its MoE layers
// (Megatron-DeepSpeed's --num-experts):
//   - moe/layer.py: "Number of experts (...) should be divisible by expert
//     parallel size";
//   - utils/groups.py: without expert tensor parallelism
//     (_create_expert_and_data_parallel) the EP groups are consecutive
//     ranks of a pipeline stage, which must divide by EP (TP x DP, with
//     Ulysses' SP ranks x SP); with it (_get_expert_parallel_ranks) they
//     lie in one TP rank's data-parallel group, which must divide by EP,
//     and the experts are split over TP;
//   - runtime/engine.py: "MoE not supported with Stage 3".
func validateMoE(m model.Model, cfg parallel.Config) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	ep, etp := cfg.ExpertParallel()
	if m.NumExperts%ep != 0 {
		bad("DeepSpeed's MoE layer needs the %d experts divisible by the expert-parallel size %d", m.NumExperts, ep)
	}
	switch tp := max(cfg.TP, 1); {
	case etp != 1 && etp != tp:
		bad("DeepSpeed's experts are whole on each rank (ETP 1) or split over TP with --enable-expert-tensor-parallelism (ETP = TP %d), not ETP %d", tp, etp)
	case etp == 1 && (tp*cfg.DP*max(cfg.CP, 1))%ep != 0:
		bad("DeepSpeed's expert-parallel groups are %d consecutive ranks of a pipeline stage, which has %d", ep, tp*cfg.DP*max(cfg.CP, 1))
	case etp > 1 && cfg.DP%ep != 0:
		bad("with expert tensor parallelism DeepSpeed's expert-parallel groups of %d lie in the data-parallel group of %d", ep, cfg.DP)
	}
	if cfg.ZeroStage == 3 {
		bad("DeepSpeed's engine refuses ZeRO stage 3 with MoE layers (\"MoE not supported with Stage 3\")")
	}
	return errs
}
