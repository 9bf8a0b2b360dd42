package templates

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Any user ds_config either is refused with an error or, laid under a
// plan with --plan-overrides-config, gives a config DeepSpeed reads with
// the plan's batch sizes and ZeRO stage. Seeds: the user configs the CLI
// tests use and DeepSpeed's documented shapes.
func FuzzPlannedDSConfig(f *testing.F) {
	for _, name := range []string{"my_ds_config.json", "zero2_offload.json", "ds_micro_batch.json"} {
		if b, err := os.ReadFile("../cmd/internal/testdata/" + name); err == nil {
			f.Add(string(b))
		}
	}
	f.Add(`{"train_batch_size": 16, "fp16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu", "pin_memory": true}}}`)
	f.Add(`{"bf16": {"enabled": "auto"}, "zero_optimization": null, "gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": "auto"}`)
	f.Add(`[]`)
	f.Add(`null`)
	cfg := parallel.Config{TP: 1, PP: 1, DP: 4, CP: 1, MicroBatch: 2, GlobalBatch: 64, NumMicroBatches: 8, ZeroStage: 2}
	f.Fuzz(func(t *testing.T, base string) {
		u, err := deepspeed.ParseUserConfig("--deepspeed_config", "fuzz.json", []byte(base))
		if err != nil {
			return
		}
		out, _, _ := dsPlanned(u, cfg, true)
		v, err := deepspeed.ParseUserConfig("--deepspeed_config", "out.json", out)
		if err != nil {
			t.Fatalf("planned config does not parse: %v\n%s", err, out)
		}
		if m, a, tr, err := v.Batch(cfg.DP); err != nil || m != 2 || a != 8 || tr != 64 || max(v.Stage, 0) != 2 {
			t.Fatalf("planned config lost the plan: micro %d accum %d train %d stage %d (%v)\n%s", m, a, tr, v.Stage, err, out)
		}
		var any map[string]any
		if err := json.Unmarshal(out, &any); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
	})
}
