package deepspeed

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The user's DeepSpeed config read into planning: what it fixes becomes a
// search constraint (Constrain) or, without planning, the batch sizes
// torchrun's order runs with (Unplanned). Errors name the config key and
// what contradicts it; callers report them as bad input.

// Unplanned takes the batch sizes, ZeRO stage and offload of the config as
// DeepSpeed derives them for dp ranks; the script's own Megatron-DeepSpeed
// flags (micro, global, fixed.ZeroStage) must agree with them.
func (u *UserConfig) Unplanned(fixed *parallel.Constraints, micro, global *int, dp int) error {
	batch := u.unplannedBatch
	if u.TrainerFillsBatch() {
		batch = u.trainerBatch
	}
	if err := batch(micro, global, dp); err != nil {
		return err
	}
	if u.Stage >= 0 {
		if fixed.ZeroStage >= 0 && fixed.ZeroStage != u.Stage {
			return fmt.Errorf("the script's --zero-stage %d contradicts %s %s: zero_optimization.stage is %d", fixed.ZeroStage, u.Flag, u.Path, u.Stage)
		}
		fixed.ZeroStage = u.Stage
	}
	if on := u.Offloads(); on != nil {
		fixed.ForceOffload = *on
	}
	return nil
}

// TrainerFillsBatch: the config is HF Trainer's (--deepspeed FILE) and
// leaves the batch sizes to it ("auto" or unset): the Trainer fills them
// from its own arguments, so the file alone gives none.
func (u *UserConfig) TrainerFillsBatch() bool {
	return u.Flag == HFTrainerFlag && u.TrainBatch == 0 && u.Micro == 0
}

// HFTrainerFlag is HF Trainer's --deepspeed FILE (TrainingArguments), as
// a config's Flag.
const HFTrainerFlag = "--deepspeed"

// TrainerBatch is HF Trainer's own batch arguments, which it fills into
// the config's "auto" batch values (0: not read).
type TrainerBatch struct{ Micro, Accum int }

// ReadTrainerBatch reads HF Trainer's batch arguments among the script's
// (TrainingArguments, parsed by argparse: the last occurrence wins, and
// HfArgumentParser also takes the dashed spelling): the per-device batch
// (--per_device_train_batch_size, default 8; the deprecated
// --per_gpu_train_batch_size wins when given) and the accumulation
// (--gradient_accumulation_steps, default 1).
func ReadTrainerBatch(args []string) (TrainerBatch, error) {
	b := TrainerBatch{Micro: 8, Accum: 1}
	for _, f := range []struct {
		name string
		to   *int
	}{{"per_device_train_batch_size", &b.Micro}, {"per_gpu_train_batch_size", &b.Micro}, {"gradient_accumulation_steps", &b.Accum}} {
		v, ok := lastArg(args, "--"+f.name)
		if d, dok := lastArg(args, "--"+strings.ReplaceAll(f.name, "_", "-")); dok && !ok {
			v, ok = d, true
		}
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return TrainerBatch{}, fmt.Errorf("--%s %q: HF Trainer wants a positive integer", f.name, v)
		}
		*f.to = n
	}
	return b, nil
}

// lastArg is the value of the last --name V or --name=V in args.
func lastArg(args []string, name string) (string, bool) {
	v, ok := "", false
	for i, a := range args {
		if s, eq := strings.CutPrefix(a, name+"="); eq {
			v, ok = s, true
		} else if a == name && i+1 < len(args) {
			v, ok = args[i+1], true
		}
	}
	return v, ok
}

// trainerBatch is the batch HF Trainer fills into the config's "auto" (or
// unset) batch values from its own arguments (u.Trainer): micro its
// per-device batch, the global batch micro x accumulation x dp.
func (u *UserConfig) trainerBatch(micro, global *int, dp int) error {
	m, a := u.Trainer.Micro, u.Trainer.Accum
	if m == 0 {
		return nil // not read (a caller that has no script arguments)
	}
	if u.Accum > 0 && u.Accum != a {
		return fmt.Errorf("%s %s: gradient_accumulation_steps is %d but the script's --gradient_accumulation_steps gives %d, a mismatch HF Trainer refuses: make them agree or set it to \"auto\"", u.Flag, u.Path, u.Accum, a)
	}
	if *micro > 0 && *micro != m {
		return fmt.Errorf("the script's --micro-batch-size %d contradicts its --per_device_train_batch_size %d, which HF Trainer puts in %s %s", *micro, m, u.Flag, u.Path)
	}
	if t := m * a * dp; *global > 0 && *global != t {
		return fmt.Errorf("--global-batch-size %d contradicts HF Trainer's batch: --per_device_train_batch_size %d x --gradient_accumulation_steps %d x %d data-parallel ranks = %d", *global, m, a, dp, t)
	}
	*micro, *global = m, m*a*dp
	return nil
}

func (u *UserConfig) unplannedBatch(micro, global *int, dp int) error {
	m, _, t, err := u.Batch(dp)
	if err != nil {
		return err
	}
	if *micro > 0 && *micro != m {
		return fmt.Errorf("the script's --micro-batch-size %d contradicts %s %s: train_micro_batch_size_per_gpu is %d for %d data-parallel ranks", *micro, u.Flag, u.Path, m, dp)
	}
	if *global > 0 && *global != t {
		return fmt.Errorf("--global-batch-size %d contradicts %s %s: train_batch_size is %d", *global, u.Flag, u.Path, t)
	}
	*micro, *global = m, t
	return nil
}

// OffloadsParams says whether the config offloads parameters
// (offload_param to a device).
func (u *UserConfig) OffloadsParams() bool {
	return u.OffloadParam != "" && u.OffloadParam != "none"
}

// GlobalBatch is the global batch: the config's train_batch_size, which
// global (--global-batch-size or the script's, 0 for none) must agree with.
func (u *UserConfig) GlobalBatch(global int) (int, error) {
	switch {
	case u.Elastic != nil:
		return global, nil // the section's, per size (Elasticity.Sizes)
	case u.TrainBatch == 0:
		return global, nil
	case global > 0 && global != u.TrainBatch:
		return 0, fmt.Errorf("--global-batch-size %d contradicts %s %s: train_batch_size is %d", global, u.Flag, u.Path, u.TrainBatch)
	}
	return u.TrainBatch, nil
}

// Constrain adds what the config fixes to the search constraints:
// micro-batch, ZeRO stage, offload and, with the accumulation steps, the
// data-parallel size for the global batch.
func (u *UserConfig) Constrain(fixed *parallel.Constraints, micro, global int) error {
	name := u.Flag + " " + u.Path
	if u.Elastic == nil && u.Micro > 0 { // with an elasticity section, DeepSpeed ignores the batch keys
		if micro > 0 && micro != u.Micro {
			return fmt.Errorf("the script's --micro-batch-size %d contradicts %s: train_micro_batch_size_per_gpu is %d", micro, name, u.Micro)
		}
		fixed.MicroBatch = u.Micro
	}
	if u.Stage >= 0 {
		if fixed.ZeroStage >= 0 && fixed.ZeroStage != u.Stage {
			return fmt.Errorf("the script's --zero-stage %d contradicts %s: zero_optimization.stage is %d", fixed.ZeroStage, name, u.Stage)
		}
		fixed.ZeroStage = u.Stage
	}
	if on := u.Offloads(); on != nil {
		fixed.ForceOffload, fixed.NoOffload = *on, !*on
	}
	if mb := max(fixed.MicroBatch, micro); u.Elastic == nil && mb > 0 && u.Accum > 0 {
		if global%(mb*u.Accum) != 0 {
			return fmt.Errorf("%s: train_batch_size %d is not divisible by micro-batch %d x gradient_accumulation_steps %d", name, global, mb, u.Accum)
		}
		fixed.DP = global / (mb * u.Accum)
	}
	return nil
}

// Conflict explains why no plan keeps the config: the keys that best, the
// best plan found without the config's constraints, changes; without one,
// the settings to keep and cause (why nothing was found).
func (u *UserConfig) Conflict(best *parallel.Config, cause error) error {
	if best == nil {
		return fmt.Errorf("no plan keeps the settings of your DeepSpeed config %s (%s): %v", u.Path, u.KeptSettings(), cause)
	}
	var keys []string
	for _, c := range u.PlanChanges(*best) {
		keys = append(keys, fmt.Sprintf("%s %v (the plan needs %v)", c.Key, c.User, c.Plan))
	}
	return fmt.Errorf("no plan keeps your DeepSpeed config %s: the plan must change %s; change the config or pass --plan-overrides-config to use the plan's values", u.Path, strings.Join(keys, ", "))
}

// KeptSettings lists the config's settings a plan must keep.
func (u *UserConfig) KeptSettings() string {
	var s []string
	for _, kv := range []struct {
		key string
		v   int
	}{{"train_batch_size", u.TrainBatch}, {"train_micro_batch_size_per_gpu", u.Micro}, {"gradient_accumulation_steps", u.Accum}} {
		if kv.v > 0 {
			s = append(s, fmt.Sprintf("%s %d", kv.key, kv.v))
		}
	}
	if u.Stage >= 0 {
		s = append(s, fmt.Sprintf("zero_optimization.stage %d", u.Stage))
	}
	if u.OffloadOptimizer != "" {
		s = append(s, "offload_optimizer "+u.OffloadOptimizer)
	}
	if u.OffloadParam != "" {
		s = append(s, "offload_param "+u.OffloadParam)
	}
	return strings.Join(s, ", ")
}
