package memory

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// tinyMoE is a 2-layer MoE model small enough to price by hand.
func tinyMoE() model.Model {
	return model.Model{Name: "tiny-moe", NumLayers: 2, Hidden: 1024, Heads: 8, FFNHidden: 4096, SeqLength: 1024,
		Vocab: 32000, MaxPositionEmbeddings: 1024, MoE: model.MoE{NumExperts: 8, TopK: 2, FFNHidden: 2048}}
}

// TestMoEMemoryByHand: tinyMoE on 8 GPUs, TP1 PP1 DP8, EP4 ETP1 (expert-DP
// = 8/(1*4*1) = 2), distributed optimizer, micro-batch 1, flash attention.
//
//	attention 4h^2+2h = 4,196,352; router 8h = 8,192; 2 local experts of
//	2*h*2048 = 8,388,608 per layer; x2 layers = 25,186,304 (16,777,216 of
//	it experts); embedding 32000*1024 = 32,768,000; final norm 1,024:
//	p = 57,955,328, pe = 16,777,216.
//	weights 2p = 115,910,656; grads 4p = 231,821,312;
//	optimizer 12(p-pe)/8 + 12pe/2 = 61,767,168 + 100,663,296 = 162,430,464.
//	activations per MoE layer: s*b*h*(10 + 4 + 4) = 18,874,368 (no dense
//	MLP), routed R = 1024*2 = 2048 tokens x (2h + 4*2048 + 2h) = 25,165,824,
//	router 8 B x 8 experts x 1024 tokens = 65,536: 44,105,728, x2 layers in
//	flight = 88,211,456; embedding 8*1024 + 1024*1024 = 1,056,768; the
//	larger of two transients that never coexist, the output layer's
//	1024*(4*1024 + 4*32000 + 2*32000) = 200,802,304 (the norm, the fp32
//	softmax and the logits' 16-bit copy) and one layer's dispatch buffers
//	2*2*2048*1024 = 8,388,608: 290,070,528.
func TestMoEMemoryByHand(t *testing.T) {
	m := tinyMoE()
	cfg := parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, NumMicroBatches: 1,
		EP: 4, ETP: 1, DistributedOptimizer: true, Recompute: parallel.RecomputeNone}
	if err := megatron.Validate(m, cfg, 8); err != nil {
		t.Fatal(err)
	}
	b := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
	want := Breakdown{Weights: 115910656, Gradients: 231821312, Optimizer: 162430464, Activations: 290070528}
	want.Other = otherFixedBytes
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"weights", b.Weights, want.Weights}, {"gradients", b.Gradients, want.Gradients},
		{"optimizer", b.Optimizer, want.Optimizer}, {"activations", b.Activations, want.Activations},
		{"other", b.Other, want.Other},
	} {
		if math.Abs(c.got-c.want) > 0.5 {
			t.Errorf("%s: %.0f, by hand %.0f", c.name, c.got, c.want)
		}
	}
	// The same model planned as dense (experts ignored) holds one 4096-wide
	// MLP per layer instead of 2 experts: it under-counts the states.
	dense := m
	dense.MoE = model.MoE{}
	d := EstimateStage(dense, parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8,
		NumMicroBatches: 1, DistributedOptimizer: true, Recompute: parallel.RecomputeNone}, parallel.FrameworkMegatron, 0)
	if d.Weights >= b.Weights {
		t.Errorf("dense weights %.0f >= MoE %.0f", d.Weights, b.Weights)
	}
}

// TestMoEExpertsShardOverEP: doubling EP halves the expert weights per GPU
// and, with the distributed optimizer, the expert-DP group halves too, so
// the expert optimizer states per GPU stay the same.
func TestMoEExpertsShardOverEP(t *testing.T) {
	m := tinyMoE()
	base := parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, NumMicroBatches: 1,
		DistributedOptimizer: true, Recompute: parallel.RecomputeNone}
	var prev modelStates
	for i, ep := range []int{1, 2, 4, 8} {
		cfg := base
		cfg.EP = ep
		st := computeModelStates(m, WithStages(m, cfg), parallel.FrameworkMegatron, 0)
		pe := StageExpertParams(m, cfg, 0)
		if want := 2 * 8.0 / float64(ep) * float64(m.ExpertParameters()); pe != want {
			t.Errorf("ep %d: expert params %.0f, want %.0f", ep, pe, want)
		}
		if i > 0 {
			if math.Abs((prev.weights-st.weights)-pe*2) > 1 {
				t.Errorf("ep %d: weights fell by %.0f, want %.0f", ep, prev.weights-st.weights, pe*2)
			}
			if math.Abs(prev.optimizer-st.optimizer) > 1 {
				t.Errorf("ep %d: optimizer %.0f changed from %.0f", ep, st.optimizer, prev.optimizer)
			}
		}
		prev = st
	}
}
