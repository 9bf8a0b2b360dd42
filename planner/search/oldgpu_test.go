package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Issue 29: on V100 (no bf16 at all) a bf16 plan was priced at the fp16
// tensor rate without a word, and attention as a flash-attention kernel no
// pre-Ampere GPU runs. A pinned bf16 is refused (use fp16); an unpinned
// precision is fp16 there; attention is priced unfused, its scores stored,
// in time and memory alike.
func TestOldGPUsHaveNoBF16AndNoFlashAttention(t *testing.T) {
	v100 := gpu.Spec{Model: "Tesla V100-SXM2-32GB", MemoryGiB: 31.7, PeakTFLOPS: 125, MemoryBandwidthTBPerS: 0.9}
	c := testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: v100, intraGBs: 150, nicGbit: 100}}, 0)
	m := model.Model{Name: "gpt-1.3b", NumLayers: 24, Hidden: 2048, Heads: 16, SeqLength: 2048, Vocab: 50257}
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Fixed: parallel.Constraints{ZeroStage: -1}, TopK: 3, Seed: 1}

	pinned := o
	pinned.Fixed.Precision = gpu.PrecisionBF16
	if _, err := Search(c, m, pinned); err == nil || !strings.Contains(err.Error(), "V100") || !strings.Contains(err.Error(), "--precision fp16") {
		t.Errorf("bf16 pinned on V100: err %v, want a refusal naming the GPU and fp16", err)
	}
	res, err := Search(c, m, o)
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Plans[0].Precision; p != gpu.PrecisionFP16 {
		t.Errorf("precision left to the planner on V100: %q, want fp16", p)
	}
	unfused := m
	unfused.MaterializedAttention = true
	want, err := Search(c, unfused, o)
	if err != nil {
		t.Fatal(err)
	}
	got, wantP := res.Plans[0], want.Plans[0]
	if got.Predicted.IterationSeconds != wantP.Predicted.IterationSeconds || got.Memory.PeakBytesPerGPU != wantP.Memory.PeakBytesPerGPU || got.Config.TP != wantP.Config.TP {
		t.Errorf("V100 plan priced %.4f s, %.2f GiB; as unfused attention %.4f s, %.2f GiB: want the same", got.Predicted.IterationSeconds,
			got.Memory.PeakBytesPerGPU/gpu.GiB, wantP.Predicted.IterationSeconds, wantP.Memory.PeakBytesPerGPU/gpu.GiB)
	}
	if a := strings.Join(Assumptions(c, m, &got, false), "\n"); !strings.Contains(a, "runs no flash-attention kernel") {
		t.Errorf("assumptions do not say attention is unfused on V100:\n%s", a)
	}
	// Ampere keeps bf16 and flash attention.
	a100 := testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 100}}, 0)
	onA100, err := Search(a100, m, o)
	if err != nil {
		t.Fatal(err)
	}
	if p := onA100.Plans[0].Precision; p != gpu.PrecisionBF16 || onA100.Model.Model.MaterializedAttention {
		t.Errorf("A100: precision %q, materialized attention %t; want bf16 and flash attention", p, onA100.Model.Model.MaterializedAttention)
	}
}
