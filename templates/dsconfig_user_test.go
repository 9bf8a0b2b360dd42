package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

func mustDS(t *testing.T, data string) *DSUserConfig {
	t.Helper()
	u, err := ParseDSUserConfig("--deepspeed_config", "ds.json", []byte(data))
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
	if _, err := ParseDSUserConfig("--deepspeed_config", "ds.json", []byte(`{"train_batch_size": 6.5}`)); err == nil || !strings.Contains(err.Error(), "train_batch_size") {
		t.Errorf("a fractional batch: %v", err)
	}
}

const zero2 = `{
  "train_batch_size": 64,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 0.5,
  "bf16": {"enabled": true},
  "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}, "reduce_bucket_size": 5e8}
}
`

func TestDSUserConfigPlanChangesNameTheKeys(t *testing.T) {
	u := mustDS(t, zero2)
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

// A plan that keeps the config renders the user's bytes; one that needs
// more adds only the missing keys; precision, clipping and the user's
// bucket size always stay.
func TestDSUserConfigPlannedKeepsTheUsersSettings(t *testing.T) {
	u := mustDS(t, zero2)
	keep := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 16, MicroBatch: 1, GlobalBatch: 64, ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}
	data, added, changed := u.Planned(keep, false)
	if string(data) != zero2 || len(added)+len(changed) != 0 {
		t.Errorf("kept: got %s (added %v changed %v), want the user's bytes", data, added, changed)
	}
	// DP 8 with micro 2: DeepSpeed would derive micro 2 too; no change.
	if data, _, _ := u.Planned(parallel.Config{DP: 8, MicroBatch: 2, GlobalBatch: 64, ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}, false); string(data) != zero2 {
		t.Errorf("derivable batch: %s", data)
	}
	u = mustDS(t, `{"train_batch_size": 64, "gradient_clipping": 0.5, "fp16": {"enabled": true}, "zero_optimization": {"reduce_bucket_size": 5e8}}`)
	data, added, _ = u.Planned(keep, false)
	var keys []string
	for _, c := range added {
		keys = append(keys, c.Key)
	}
	if got := strings.Join(keys, ","); got != "gradient_accumulation_steps,train_micro_batch_size_per_gpu,zero_optimization.offload_optimizer,zero_optimization.stage" {
		t.Errorf("added %s", got)
	}
	for _, want := range []string{`"gradient_clipping": 0.5`, `"reduce_bucket_size": 500000000`, `"fp16": {`, `"gradient_accumulation_steps": 4`, `"stage": 2`, `"device": "cpu"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("planned config lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "bf16") {
		t.Errorf("the plan added a precision the user did not choose:\n%s", data)
	}
	if err := CheckDSConfig(data, 16, 1); err != nil {
		t.Errorf("planned config fails DeepSpeed's checks: %v", err)
	}
}

// "auto" values are filled in place: every other byte stays the user's.
func TestDSUserConfigFillAutoKeepsEveryOtherByte(t *testing.T) {
	user := "{\n  // not JSON, but kept\n  \"train_micro_batch_size_per_gpu\" :\"auto\",\n  \"train_batch_size\": 32,\"lr\": \"auto\"}"
	u := &DSUserConfig{Data: []byte(user), raw: map[string]any{"train_micro_batch_size_per_gpu": "auto", "train_batch_size": 32.0, "lr": "auto"}, Auto: []string{"lr", "train_micro_batch_size_per_gpu"}}
	got := string(u.FillAuto(parallel.Config{DP: 4, MicroBatch: 2, GlobalBatch: 32}))
	if want := strings.Replace(user, `:"auto",`, `:2,`, 1); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if left := u.LeftAuto(); len(left) != 1 || left[0] != "lr" {
		t.Errorf("left auto %v, want [lr] (HuggingFace's to fill)", left)
	}
}
