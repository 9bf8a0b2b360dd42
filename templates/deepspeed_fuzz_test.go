package templates

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner"
)

// Any user ds_config either merges with a planned one or errs; a merge is
// valid JSON that carries the plan's batch sizes and ZeRO stage. Seeds:
// the user config the CLI tests use and DeepSpeed's documented shapes.
func FuzzOverlayDSConfig(f *testing.F) {
	if b, err := os.ReadFile("../cmd/pipette-launch/testdata/my_ds_config.json"); err == nil {
		f.Add(string(b))
	}
	f.Add(`{"train_batch_size": 16, "fp16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}, "offload_optimizer": {"device": "cpu", "pin_memory": true}}}`)
	f.Add(`{"bf16": {"enabled": "auto"}, "zero_optimization": null, "gradient_clipping": 1.0}`)
	f.Add(`[]`)
	cfg := planner.Config{TP: 1, PP: 1, DP: 4, CP: 1, MicroBatch: 2, GlobalBatch: 64, NumMicroBatches: 8, ZeroStage: 2}
	planned, err := MarshalDSConfig(DeepSpeedConfig(cfg, false))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, base string) {
		out, _, err := overlayDSConfig([]byte(base), planned)
		if err != nil {
			return
		}
		var got struct {
			TrainBatchSize int `json:"train_batch_size"`
			Zero           struct {
				Stage int `json:"stage"`
			} `json:"zero_optimization"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("merge is not JSON: %v\n%s", err, out)
		}
		if got.TrainBatchSize != 64 || got.Zero.Stage != 2 {
			t.Fatalf("merge lost the plan: %+v\n%s", got, out)
		}
	})
}
