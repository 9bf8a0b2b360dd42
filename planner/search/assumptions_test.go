package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Issue 22: the attention kernel was a silent assumption, and so were GPUs
// the curves were never fitted to, the TF32 rate fp32 plans are priced at
// and DeepSpeed's fitted engine cost. Assumptions names them.
func TestAssumptionsNameAttentionAndUnfittedGPUs(t *testing.T) {
	a100 := dgxA100(1)
	rtx := testCluster([]islandDef{{hosts: 1, gpus: 4, gpu: gpu.Spec{Model: "NVIDIA GeForce RTX 3090", MemoryGiB: 24, PeakTFLOPS: 71, MemoryBandwidthTBPerS: 0.936}, intraGBs: 25, nicGbit: 100}}, 0)
	v100 := testCluster([]islandDef{{hosts: 1, gpus: 4, gpu: gpu.Spec{Model: "V100-16GB-SXM2"}, intraGBs: 150, nicGbit: 100}}, 0)
	// A100s whose cluster file gives the plain FP32 rate: the job leaves
	// TF32 off (PyTorch's default), as Sailor's fp32 runs do.
	noTF32 := testCluster([]islandDef{{hosts: 1, gpus: 4, gpu: gpu.Spec{Model: "A100-40GB-SXM", PeakFP32TFLOPS: 19.5}, intraGBs: 300, nicGbit: 100}}, 0)
	fused, unfused := tinyModel, tinyModel
	unfused.MaterializedAttention = true
	fp32 := &Plan{}
	fp32.Precision = gpu.PrecisionFP32
	fp32DS := &Plan{Framework: parallel.FrameworkDeepSpeed}
	fp32DS.Precision, fp32DS.ZeroStage = gpu.PrecisionFP32, 1
	for _, c := range []struct {
		name       string
		got        []string
		want, none []string
	}{
		{"fused on A100", Assumptions(a100, fused, &Plan{}, false), []string{"fused flash-attention", "materialized_attention: true"}, []string{"datasheet"}},
		{"unfused", Assumptions(a100, unfused, &Plan{}, false), []string{"unfused", "model file says"}, []string{"datasheet"}},
		{"fp32", Assumptions(a100, fused, fp32, false), []string{"fp32 has no flash-attention", "TF32 tensor-core rate", "allow_tf32 = True"}, []string{"pipeline engine"}},
		{"fp32 DeepSpeed", Assumptions(a100, fused, fp32DS, false), []string{"TF32 tensor-core rate", "pipeline engine in fp32 priced at 2.10 ms"}, nil},
		{"bf16", Assumptions(a100, fused, &Plan{}, false), nil, []string{"TF32", "pipeline engine"}},
		{"RTX 3090 uncalibrated", Assumptions(rtx, fused, &Plan{}, false), []string{"RTX-3090: compute priced from datasheet rates", "calibrate"}, nil},
		{"fp32, TF32 GPU named", Assumptions(a100, fused, fp32, false), []string{"fp32 GEMMs on A100-80GB-SXM priced at the TF32"}, nil},
		{"fp32 on V100 (no TF32)", Assumptions(v100, fused, fp32, false), []string{"fp32 has no flash-attention"}, []string{"TF32"}},
		{"fp32, TF32 left off in the cluster file", Assumptions(noTF32, fused, fp32, false), []string{"fp32 has no flash-attention"}, []string{"TF32"}},
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
