package megatron

import (
	"slices"
	"strings"
	"testing"
)

// Megatron-DeepSpeed's MoE flags read as its transformer.py and DeepSpeed's
// MoE layer use them: --num-experts a list (pyramid: the largest count,
// with a note), --topk, --expert-interval (1-based multiples), residual
// MoE's dense MLP, dropless routing.
func TestDeepSpeedMoEModelFromArgs(t *testing.T) {
	base := "--num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 2048 --vocab-size 50257 --deepspeed "
	for _, tc := range []struct {
		args       string
		experts    int
		topk       int
		cf         float64
		shared     int
		moeLayers  []int
		note, fail string
	}{
		{args: "--num-experts 64", experts: 64, topk: 1, cf: 1, moeLayers: []int{1, 3, 5, 7, 9, 11}},
		{args: "--num-experts 8 --topk 2 --expert-interval 3 --moe-train-capacity-factor 1.25", experts: 8, topk: 2, cf: 1.25, moeLayers: []int{2, 5, 8, 11}},
		{args: "--num-experts 32 32 32 32 64 64 --mlp-type residual", experts: 64, topk: 1, cf: 1, shared: 3072, moeLayers: []int{1, 3, 5, 7, 9, 11}, note: "largest count, 64"},
		{args: "--num-experts 16 --disable-moe-token-dropping", experts: 16, topk: 1, moeLayers: []int{1, 3, 5, 7, 9, 11}},
		{args: "--num-experts 1 --moe-expert-parallel-size 8"},
		{args: "--num-experts 32 64", fail: "lists 2 counts"},
		{args: "--num-experts 8 --mlp-type gated", fail: "--mlp-type"},
	} {
		args := strings.Fields(base + tc.args)
		m, _, _, err := ModelFromArgs(args)
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%s: error %v, want %q", tc.args, err, tc.fail)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		var layers []int
		for i := range m.NumLayers {
			if m.IsMoELayer(i) {
				layers = append(layers, i)
			}
		}
		if m.NumExperts != tc.experts || (tc.experts > 0 && m.MoETopK() != tc.topk) || m.CapacityFactor != tc.cf ||
			m.SharedFFN != tc.shared || !slices.Equal(layers, tc.moeLayers) {
			t.Errorf("%s: read %+v, MoE layers %v", tc.args, m.MoE, layers)
		}
		notes := strings.Join(UnmodelledFeatures(args), "\n")
		if (tc.note == "") != (notes == "") || !strings.Contains(notes, tc.note) {
			t.Errorf("%s: notes %q, want %q", tc.args, notes, tc.note)
		}
	}
}
