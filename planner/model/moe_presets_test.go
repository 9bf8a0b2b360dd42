package model

import (
	"math"
	"testing"
)

// Published total and active parameter counts of the MoE presets.
// Publishers count "active" differently: Mistral (12.9B / 39B) and Qwen
// count both embedding matrices; OpenAI (gpt-oss model card: 116.83B /
// 5.13B and 20.91B / 3.61B) and DeepSeek leave the input embedding out of
// the active figure. Sources of the shapes and figures:
//   - Mixtral-8x7B: mistralai/Mixtral-8x7B-v0.1 config.json (hidden 4096,
//     32 layers, 32 heads, 8 KV heads, intermediate 14336, 8 experts, top-2,
//     vocab 32000); "46.7B total parameters but only uses 12.9B parameters
//     per token" (Mistral's release post, quoted in Azure/azureml-assets
//     assets/models/system/mistralai-Mixtral-8x7B-Instruct-v01/description.md).
//   - Mixtral-8x22B: mistral-community/Mixtral-8x22B-v0.1 config.json (hidden
//     6144, 56 layers, 48 heads, 8 KV heads, intermediate 16384); 141B total,
//     39B active (Mistral's release post).
//   - Qwen3-30B-A3B: Qwen/Qwen3-30B-A3B config.json, also as Megatron flags in
//     zyzshishui/slime scripts/models/qwen3-30B-A3B.sh; model card "30.5B in
//     total and 3.3B activated".
//   - DeepSeek-V2-Lite: deepseek-ai/DeepSeek-V2-Lite config.json (Megatron
//     form: moe_layer_freq "([0]*1+[1]*26)", moe_ffn_hidden_size 1408,
//     moe_shared_expert_intermediate_size 2816); "16B total (15.7B), 2.4B
//     active".
//   - gpt-oss: openai/gpt-oss-120b and -20b config.json (hidden 2880, head_dim
//     64, 64 heads, 8 KV heads, intermediate 2880, 128 / 32 experts, top-4,
//     vocab 201088); totals and actives from the gpt-oss model card.
func TestMoEPresetParametersMatchPublished(t *testing.T) {
	cases := []struct {
		name          string
		total, active float64
		activeNoEmbed bool // the published active figure leaves out the input embedding
		activeTol     float64
	}{
		{"mixtral-8x7b", 46.7e9, 12.9e9, false, 0.01},
		{"mixtral-8x22b", 141e9, 39e9, false, 0.01},
		// 3.353B active against the card's two-digit "3.3B": 1.6%; the
		// total matches the checkpoint's 30,532,122,624 exactly.
		{"qwen3-30b-a3b", 30.5e9, 3.3e9, false, 0.02},
		{"deepseek-v2-lite-style", 15.7e9, 2.4e9, true, 0.01},
		{"gpt-oss-20b", 20.91e9, 3.61e9, true, 0.01},
		{"gpt-oss-120b", 116.83e9, 5.13e9, true, 0.01},
	}
	for _, c := range cases {
		m, err := Preset(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("%s: preset invalid: %v", c.name, err)
		}
		total := float64(m.Parameters())
		active := float64(m.ActiveParameters())
		if c.activeNoEmbed {
			active -= float64(m.EmbeddingParameters())
		}
		relT := math.Abs(total-c.total) / c.total
		relA := math.Abs(active-c.active) / c.active
		t.Logf("%-24s total %.3fB (published %.2fB, %+.2f%%)  active %.3fB (published %.2fB, %+.2f%%)",
			c.name, total/1e9, c.total/1e9, 100*(total-c.total)/c.total, active/1e9, c.active/1e9, 100*(active-c.active)/c.active)
		if relT > 0.01 {
			t.Errorf("%s: total %.4gB, published %.4gB (off by %.2f%%)", c.name, total/1e9, c.total/1e9, 100*relT)
		}
		if relA > c.activeTol {
			t.Errorf("%s: active %.4gB, published %.4gB (off by %.2f%%)", c.name, active/1e9, c.active/1e9, 100*relA)
		}
	}
	// Qwen3-30B-A3B's checkpoint holds 30,532,122,624 parameters; the only
	// ones the model leaves out are the QK-norm weights (--qk-layernorm:
	// 2 x 128 per layer).
	q, _ := Preset("qwen3-30b-a3b")
	if got, want := q.Parameters()+int64(q.NumLayers*2*q.HeadDim()), int64(30532122624); got != want {
		t.Errorf("qwen3-30b-a3b: %d parameters + QK norms, the checkpoint has %d", got, want)
	}
}
