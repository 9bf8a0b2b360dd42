package templates

import (
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// A plan that keeps the config renders the user's bytes; one that needs
// more adds only the missing keys; precision, clipping and the user's
// bucket size always stay.
func TestDSUserConfigPlannedKeepsTheUsersSettings(t *testing.T) {
	u := mustDS(t, readZero2(t))
	keep := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 16, MicroBatch: 1, GlobalBatch: 64, ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}
	data, added, changed := dsPlanned(u, keep, false)
	if string(data) != readZero2(t) || len(added)+len(changed) != 0 {
		t.Errorf("kept: got %s (added %v changed %v), want the user's bytes", data, added, changed)
	}
	// DP 8 with micro 2: DeepSpeed would derive micro 2 too; no change.
	if data, _, _ := dsPlanned(u, parallel.Config{DP: 8, MicroBatch: 2, GlobalBatch: 64, ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}, false); string(data) != readZero2(t) {
		t.Errorf("derivable batch: %s", data)
	}
	u = mustDS(t, `{"train_batch_size": 64, "gradient_clipping": 0.5, "fp16": {"enabled": true}, "zero_optimization": {"reduce_bucket_size": 5e8}}`)
	data, added, _ = dsPlanned(u, keep, false)
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
	u := &deepspeed.UserConfig{Data: []byte(user), Auto: []string{"lr", "train_micro_batch_size_per_gpu"}}
	got := string(dsFillAuto(u, parallel.Config{DP: 4, MicroBatch: 2, GlobalBatch: 32}))
	if want := strings.Replace(user, `:"auto",`, `:2,`, 1); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if left := dsLeftAuto(u); len(left) != 1 || left[0] != "lr" {
		t.Errorf("left auto %v, want [lr] (HuggingFace's to fill)", left)
	}
}

func mustDS(t *testing.T, data string) *deepspeed.UserConfig {
	t.Helper()
	u, err := deepspeed.ParseUserConfig("--deepspeed_config", "ds.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// readZero2 is planner/deepspeed's ZeRO-2 + CPU offload test config.
func readZero2(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../planner/deepspeed/testdata/zero2.json")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
