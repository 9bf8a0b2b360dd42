package deepspeed

import (
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// zero2 is a ZeRO-2 + CPU offload config (testdata/zero2.json).
func zero2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/zero2.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustDS(t *testing.T, data string) *UserConfig {
	t.Helper()
	u, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// DeepSpeed's own derivation of the batch triple (_set_batch_related_parameters).
func TestDSUserConfigBatchAsDeepSpeedDerivesIt(t *testing.T) {
	cases := []struct {
		json                string
		dp                  int
		micro, accum, train int
		err                 string
	}{
		{`{"train_batch_size": 64, "gradient_accumulation_steps": 4}`, 16, 1, 4, 64, ""},
		{`{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}`, 8, 2, 4, 64, ""},
		{`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3}`, 4, 2, 3, 24, ""},
		{`{"train_batch_size": 32}`, 8, 4, 1, 32, ""},
		{`{"train_micro_batch_size_per_gpu": 4}`, 2, 4, 1, 8, ""},
		{`{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4}`, 2, 4, 1, 8, ""},
		{`{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}`, 8, 0, 0, 0, "train_batch_size 64 != train_micro_batch_size_per_gpu 2 x gradient_accumulation_steps 2 x 8"},
		{`{"train_batch_size": 64, "gradient_accumulation_steps": 4}`, 24, 0, 0, 0, "gradient_accumulation_steps 4 x 24"},
		{`{"optimizer": {}}`, 8, 0, 0, 0, "neither train_batch_size nor train_micro_batch_size_per_gpu"},
	}
	for _, c := range cases {
		m, a, tr, err := mustDS(t, c.json).Batch(c.dp)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "ds.json") {
				t.Errorf("%s dp %d: err %v, want %q", c.json, c.dp, err, c.err)
			}
			continue
		}
		if err != nil || m != c.micro || a != c.accum || tr != c.train {
			t.Errorf("%s dp %d: got %d %d %d %v, want %d %d %d", c.json, c.dp, m, a, tr, err, c.micro, c.accum, c.train)
		}
	}
	if _, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(`{"train_batch_size": 6.5}`)); err == nil || !strings.Contains(err.Error(), "train_batch_size") {
		t.Errorf("a fractional batch: %v", err)
	}
}

func TestDSUserConfigPlanChangesNameTheKeys(t *testing.T) {
	u := mustDS(t, zero2(t))
	keep := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 16, MicroBatch: 1, GlobalBatch: 64, ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}
	if c := u.PlanChanges(keep); len(c) != 0 {
		t.Errorf("a plan that keeps the config: changes %+v", c)
	}
	other := keep
	other.DP, other.MicroBatch, other.ZeroStage, other.Offload = 32, 2, 3, parallel.Offload{}
	var keys []string
	for _, c := range u.PlanChanges(other) {
		keys = append(keys, c.Key)
	}
	if got := strings.Join(keys, ","); got != "gradient_accumulation_steps,zero_optimization.stage,zero_optimization.offload_optimizer.device" {
		t.Errorf("changed keys = %s", got)
	}
}

// TestParseUserConfigHostileValues (issue 31): `"train_batch_size": "16"`
// was reported as "got 16" (the quotes lost), `"stage": 7` passed and
// ended in a suggestion to use --plan-overrides-config, and 1e30 overflowed.
// Each names the key, what was written and what is allowed.
func TestParseUserConfigHostileValues(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"train_batch_size": "16"}`, `ds.json: train_batch_size: want a non-negative integer, "auto" or null, got the string "16" (write numbers without quotes)`},
		{`{"train_batch_size": 16, "zero_optimization": {"stage": 7}}`, `ds.json: zero_optimization.stage: want a ZeRO stage 0, 1, 2 or 3, "auto" or null, got 7`},
		{`{"train_batch_size": 16, "zero_optimization": {"stage": -1}}`, `zero_optimization.stage: want a ZeRO stage 0, 1, 2 or 3, "auto" or null, got -1`},
		{`{"train_batch_size": 1e30}`, `train_batch_size: want an integer from 1 to 16777216, "auto" or null, got 1e+30`},
		{`{"train_micro_batch_size_per_gpu": 16777217}`, `train_micro_batch_size_per_gpu: want an integer from 1 to 16777216, "auto" or null, got 16777217`},
		{`{"train_batch_size": 8, "zero_optimization": {"cpu_offload": "yes"}}`, `zero_optimization.cpu_offload: want true or false, got the string "yes"`},
	} {
		_, err := ParseUserConfig("--deepspeed_config", "ds.json", []byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s", tc.json, err, tc.want)
		}
	}
}
