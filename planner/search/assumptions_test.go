package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Issue 22: the attention kernel was a silent assumption, and so were GPUs
// the curves were never fitted to. Assumptions names both.
func TestAssumptionsNameAttentionAndUnfittedGPUs(t *testing.T) {
	a100 := dgxA100(1)
	rtx := testCluster([]islandDef{{hosts: 1, gpus: 4, gpu: gpu.Spec{Model: "NVIDIA GeForce RTX 3090", MemoryGiB: 24, PeakTFLOPS: 71, MemoryBandwidthTBPerS: 0.936}, intraGBs: 25, nicGbit: 100}}, 0)
	fused, unfused := tinyModel, tinyModel
	unfused.MaterializedAttention = true
	fp32 := &Plan{}
	fp32.Precision = gpu.PrecisionFP32
	for _, c := range []struct {
		name       string
		got        []string
		want, none []string
	}{
		{"fused on A100", Assumptions(a100, fused, &Plan{}, false), []string{"fused flash-attention", "materialized_attention: true"}, []string{"datasheet"}},
		{"unfused", Assumptions(a100, unfused, &Plan{}, false), []string{"unfused", "model file says"}, []string{"datasheet"}},
		{"fp32", Assumptions(a100, fused, fp32, false), []string{"fp32 has no flash-attention"}, nil},
		{"RTX 3090 uncalibrated", Assumptions(rtx, fused, &Plan{}, false), []string{"RTX-3090: compute priced from datasheet rates", "calibrate"}, nil},
		{"RTX 3090 calibrated", Assumptions(rtx, fused, &Plan{}, true), nil, []string{"datasheet"}},
	} {
		all := strings.Join(c.got, "\n")
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: %q lacks %q", c.name, all, w)
			}
		}
		for _, w := range c.none {
			if strings.Contains(all, w) {
				t.Errorf("%s: %q should not say %q", c.name, all, w)
			}
		}
	}
}
