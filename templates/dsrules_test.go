package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// TestDSUserConfigAsDeepSpeedReadsIt (issue 21): a user's config with
// comments and trailing commas passes through byte for byte; ZeRO stage 0
// with a CPU offload block is accepted (DeepSpeed ignores it without ZeRO);
// the deprecated cpu_offload is never joined by an offload_optimizer,
// which DeepSpeed refuses beside it.
func TestDSUserConfigAsDeepSpeedReadsIt(t *testing.T) {
	commented := "{\n  // ZeRO-1\n  \"train_micro_batch_size_per_gpu\": 1,\n  \"zero_optimization\": {\"stage\": 1,},\n}\n"
	u := mustDS(t, commented)
	cfg := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 4, MicroBatch: 1, GlobalBatch: 4, ZeroStage: 1}
	if data, added, changed := dsPlanned(u, cfg, false); string(data) != commented || len(added)+len(changed) != 0 {
		t.Errorf("commented config: got %q (added %v, changed %v), want the user's bytes", data, added, changed)
	}
	if err := checkDSSettings([]byte(commented), 1); err != nil {
		t.Errorf("commented config refused: %v", err)
	}
	if err := checkDSSettings([]byte(`{"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}}`), 1); err != nil {
		t.Errorf("stage 0 with CPU offload refused, DeepSpeed accepts it: %v", err)
	}
	legacy := mustDS(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "cpu_offload": false}}`)
	cfg.ZeroStage = 2
	if data, _, _ := dsPlanned(legacy, cfg, false); strings.Contains(string(data), "offload_optimizer") {
		t.Errorf("offload_optimizer added beside cpu_offload:\n%s", data)
	}
	cfg.Offload.OptimizerFraction = 1
	data, _, changed := dsPlanned(legacy, cfg, true)
	if strings.Contains(string(data), "cpu_offload") || !strings.Contains(string(data), "offload_optimizer") || len(changed) == 0 {
		t.Errorf("an overriding plan that offloads must replace cpu_offload, not join it:\n%s (changed %v)", data, changed)
	}
}
