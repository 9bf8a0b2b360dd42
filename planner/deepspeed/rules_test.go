package deepspeed

import (
	"strings"
	"testing"
)

// TestConfigRulesAreDeepSpeeds (issue 21): a user's config is read by
// DeepSpeed's own rules (deepspeed/runtime/config.py, zero/config.py
// v0.14.4): hjson's comments and trailing commas accepted, a null
// gradient_accumulation_steps derived, a batch value of 0 and a duplicate
// key refused, the deprecated cpu_offload read as offload_optimizer and
// refused beside it.
func TestConfigRulesAreDeepSpeeds(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		wantErr      string // "" = accepted
		stage        int
		offload      string
		micro, accum int
	}{
		{"comments and trailing commas", `{
  // ZeRO-2 on 8 ranks
  "train_micro_batch_size_per_gpu": 2, # two per GPU
  /* accumulation */ "gradient_accumulation_steps": 4,
  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu",},},
}`, "", 2, "cpu", 2, 4},
		{"a comment marker inside a string stays", `{"train_micro_batch_size_per_gpu": 1, "wandb": {"project": "a//b#c"}}`, "", -1, "", 1, 1},
		{"accumulation null is derived", `{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": null}`, "", -1, "", 2, 2},
		{"accumulation 0 is refused", `{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 0}`, "gradient_accumulation_steps: want a positive integer", 0, "", 0, 0},
		{"duplicate key is refused", `{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1, "stage": 2}}`, "key zero_optimization.stage is given twice", 0, "", 0, 0},
		{"legacy cpu_offload true is offload", `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "cpu_offload": true}}`, "", 2, "cpu", 1, 1},
		{"legacy cpu_offload false is no offload", `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "cpu_offload": false}}`, "", 2, "none", 1, 1},
		{"cpu_offload beside offload_optimizer is refused", `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "cpu_offload": true, "offload_optimizer": {"device": "cpu"}}}`, "Cannot provide deprecated parameter 'cpu_offload'", 0, "", 0, 0},
	} {
		u, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(tc.config))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		micro, accum, _, err := u.Batch(8)
		if err != nil || micro != tc.micro || accum != tc.accum || u.Stage != tc.stage || u.OffloadOptimizer != tc.offload {
			t.Errorf("%s: micro %d accum %d stage %d offload %q (%v); want %d %d %d %q", tc.name, micro, accum, u.Stage, u.OffloadOptimizer, err, tc.micro, tc.accum, tc.stage, tc.offload)
		}
	}
}
