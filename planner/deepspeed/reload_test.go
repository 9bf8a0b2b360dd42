package deepspeed

import (
	"strings"
	"testing"
)

// TestCheckReload: DeepSpeed v0.14.4's rule for loading a checkpoint at
// another data-parallel size (engine.py's _load_zero_checkpoint), per
// config; TestDeepSpeedReloadRules in cmd/internal/run runs it on the real
// engine.
func TestCheckReload(t *testing.T) {
	tests := []struct {
		name, config string
		savedDP, dp  int
		wantErr      string // "" when DeepSpeed loads it
	}{
		{"no ZeRO, fp32", `{"train_batch_size": 8}`, 4, 3, ""},
		{"ZeRO-0, fp16", `{"train_batch_size": 8, "fp16": {"enabled": true}, "zero_optimization": {"stage": 0}}`, 4, 3, ""},
		{"ZeRO-1", `{"train_batch_size": 8, "zero_optimization": {"stage": 1}}`, 4, 3, "ZeRO stage 1"},
		{"ZeRO-2, elastic_checkpoint", `{"train_batch_size": 8, "zero_optimization": {"stage": 2, "elastic_checkpoint": true}}`, 8, 6, "ZeRO stage 2"},
		{"ZeRO-3", `{"train_batch_size": 8, "zero_optimization": {"stage": 3}}`, 8, 6, "ZeRO stage 3"},
		{"bf16 without ZeRO", `{"train_batch_size": 8, "bf16": {"enabled": true}}`, 8, 6, "bf16"},
		{"the old bfloat16 key", `{"train_batch_size": 8, "bfloat16": {"enabled": true}}`, 8, 6, "bf16"},
		{"bf16 off", `{"train_batch_size": 8, "bf16": {"enabled": false}}`, 8, 6, ""},
		{"ZeRO-1, same DP", `{"train_batch_size": 8, "zero_optimization": {"stage": 1}}`, 4, 4, ""},
		{"ZeRO-1, universal", `{"train_batch_size": 8, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`, 4, 3, ""},
		{"ZeRO-2, universal off", `{"train_batch_size": 8, "zero_optimization": {"stage": 2}, "checkpoint": {"load_universal": false}}`, 4, 2, "ZeRO stage 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(tt.config))
			if err != nil {
				t.Fatal(err)
			}
			err = u.CheckReload(tt.savedDP, tt.dp)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("accepted, want a refusal naming %q", tt.wantErr)
			case err != nil && (!strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "ds_to_universal.py") || !strings.Contains(err.Error(), "--deepspeed_config ds.json")):
				t.Errorf("error %q: want it to name %q, the config and what to do", err, tt.wantErr)
			}
		})
	}
}

// TestElasticityDecidesBatch: with an enabled elasticity section Batch is
// compute_elastic_config's (the global batch kept across valid world
// sizes), an invalid world size is refused, and batch keys beside the
// section are refused unless ignore_non_elastic_batch_info says so, as
// DeepSpeedConfig does.
func TestElasticityDecidesBatch(t *testing.T) {
	const sec = `"elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [1, 2], "version": 0.1}`
	tests := []struct {
		name, config        string
		dp                  int
		micro, accum, train int
		wantErr             string
	}{
		// Values from DeepSpeed's compute_elastic_config (TestElasticBatchMatchesDeepSpeed runs it).
		{"8 ranks", `{` + sec + `}`, 8, 2, 3, 48, ""},
		{"6 ranks", `{` + sec + `}`, 6, 2, 4, 48, ""},
		{"5 ranks", `{` + sec + `}`, 5, 0, 0, 0, "not valid"},
		{"batch keys refused", `{"train_batch_size": 16, ` + sec + `}`, 8, 0, 0, 0, "train_batch_size beside an enabled elasticity section"},
		{"batch keys ignored", `{"train_batch_size": 16, "elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [1, 2], "version": 0.1, "ignore_non_elastic_batch_info": true}}`, 6, 2, 4, 48, ""},
		{"disabled section", `{"train_batch_size": 16, "elasticity": {"enabled": false, "max_train_batch_size": 48}}`, 8, 2, 1, 16, ""},
		{"no micro batches", `{"elasticity": {"enabled": true, "max_train_batch_size": 48}}`, 8, 0, 0, 0, "micro_batch_sizes is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(tt.config))
			var m, a, tr int
			if err == nil {
				m, a, tr, err = u.Batch(tt.dp)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || m != tt.micro || a != tt.accum || tr != tt.train {
				t.Fatalf("got micro %d accumulation %d batch %d (%v), want %d %d %d", m, a, tr, err, tt.micro, tt.accum, tt.train)
			}
		})
	}
}
