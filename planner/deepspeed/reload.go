package deepspeed

import "fmt"

// DPFixedBy says why DeepSpeed v0.14.4 cannot load this config's
// checkpoint at a data-parallel size other than the one that saved it, ""
// when it can. Its rules (deepspeed/runtime/engine.py, v0.14.4):
//
//   - load_checkpoint (line 2767) loads ZeRO's partitioned optimizer states
//     when ZeRO is on (zero_optimization.stage 1, 2 or 3) or bf16 is
//     (BF16_Optimizer partitions them too, zero_optimization off or not);
//   - _load_zero_checkpoint (lines 2948-2953) then raises
//     ZeRORuntimeException ("The checkpoint being loaded used a DP world
//     size of N but the current world size is M. Automatic adjustment of
//     ZeRO's optimizer state partitioning with a new world size is not
//     currently supported.") whenever the sizes differ, before ZeRO's own
//     loader runs: zero_optimization.elastic_checkpoint changes nothing
//     here (stage_1_and_2.py reads it only past that check);
//   - "checkpoint": {"load_universal": true} skips that check and loads a
//     universal checkpoint (written by DeepSpeed's
//     deepspeed/checkpoint/ds_to_universal.py) at any size.
//
// Megatron-DeepSpeed's --universal-checkpoint sets load_universal in the
// config it gives DeepSpeed (UniversalCheckpointArg).
//
// Without ZeRO and bf16 (fp32, fp16's FP16_Optimizer) the optimizer's state
// is whole in mp_rank_*_model_states.pt and loads at any size.
func (u *UserConfig) DPFixedBy() string {
	if u.UniversalArg {
		return ""
	}
	if ck, ok := u.raw["checkpoint"].(map[string]any); ok {
		if on, _ := ck["load_universal"].(bool); on {
			return ""
		}
	}
	switch {
	case u.Stage >= 1:
		return fmt.Sprintf("%s %s: ZeRO stage %d", u.Flag, u.Path, u.Stage)
	case u.bf16():
		return fmt.Sprintf("%s %s: bf16 (its BF16_Optimizer partitions the optimizer states as ZeRO does)", u.Flag, u.Path)
	}
	return ""
}

// bf16 is get_bfloat16_enabled: "bf16" (or the old "bfloat16") with
// "enabled": true.
func (u *UserConfig) bf16() bool {
	for _, k := range []string{"bf16", "bfloat16"} {
		if sec, ok := u.raw[k].(map[string]any); ok {
			on, _ := sec["enabled"].(bool)
			return on
		}
	}
	return false
}

// CheckReload is the restart's check of a new data-parallel size against
// the one the job's checkpoint was saved at: an error, naming DeepSpeed's
// rule and what to do, when DeepSpeed v0.14.4 would refuse to load it.
func (u *UserConfig) CheckReload(savedDP, dp int) error {
	if savedDP == dp {
		return nil
	}
	why := u.DPFixedBy()
	if why == "" {
		return nil
	}
	return fmt.Errorf("%s: DeepSpeed v0.14.4 loads its checkpoint only at the data-parallel size that saved it (%d, here %d: engine.py's _load_zero_checkpoint raises ZeRORuntimeException); to resume on fewer ranks, convert each checkpoint with DeepSpeed's deepspeed/checkpoint/ds_to_universal.py and set \"checkpoint\": {\"load_universal\": true}", why, savedDP, dp)
}

// UniversalCheckpointArg says the script's arguments have Megatron-DeepSpeed's
// --universal-checkpoint, a store_true flag whose
// _create_ds_config_dict (microsoft/Megatron-DeepSpeed,
// megatron/training.py, commit 7632408b) sets "checkpoint":
// {"load_universal": true} in the config it hands DeepSpeed.
func UniversalCheckpointArg(args []string) bool {
	for _, a := range args {
		if a == "--universal-checkpoint" {
			return true
		}
	}
	return false
}

// PinnedWhy says why an elastic restart has no layout: its checkpoint
// (DPFixedBy) loads only at the data-parallel size savedDP that saved it,
// and err is the planner's answer on the hosts left with DP pinned there.
func (u *UserConfig) PinnedWhy(savedDP int, err error) error {
	return fmt.Errorf("%s: DeepSpeed v0.14.4 loads its checkpoint only at the data-parallel size that saved it (DP %d: engine.py's _load_zero_checkpoint raises ZeRORuntimeException at another), and no layout with DP %d fits the hosts left: %v; to resume at another size, resume from a universal checkpoint: convert each checkpoint with DeepSpeed's deepspeed/checkpoint/ds_to_universal.py and set \"checkpoint\": {\"load_universal\": true} (Megatron-DeepSpeed: --universal-checkpoint)",
		u.DPFixedBy(), savedDP, savedDP, err)
}
