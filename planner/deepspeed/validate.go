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
		errs = append(errs, fmt.Errorf("mixture-of-experts models are planned for Megatron-LM only (use --framework megatron)"))
	}
	if cfg.Offload.Params && cfg.ZeroStage != 3 {
		errs = append(errs, fmt.Errorf("DeepSpeed parameter offload needs ZeRO stage 3"))
	}
	return errors.Join(errs...)
}
