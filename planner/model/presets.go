package model

import (
	"fmt"
	"sort"
	"strings"
)

// GPT-3 presets follow Brown et al. 2020, Table 2.1, with two fixes Megatron
// needs (hidden % heads == 0): GPT-3 XL (1.3B) uses 16 heads of 128 (the
// table's d_head) instead of 24, and 13B uses hidden 5120 = 40 x 128 instead
// of the table's 5140. Vocabulary is GPT-2 BPE's 50257 tokens; Megatron pads
// it to a multiple of 128*TP at start-up (--make-vocab-size-divisible-by
// 128), which the memory estimator applies per plan (PaddedVocab).
// Sequence 2048, tied embeddings, GeLU MLP of 4*hidden.
//
// Llama presets follow the published model cards/configs: Llama-2 (Touvron
// et al. 2023) seq 4096, vocab 32000, untied, SwiGLU; 70B uses GQA with 8
// KV groups and FFN 28672. Llama-3 (Meta 2024) vocab 128256, seq 8192, GQA 8.
var presets = map[string]Model{
	"gpt3-125m":  gpt3("gpt3-125m", 12, 768, 12),
	"gpt3-350m":  gpt3("gpt3-350m", 24, 1024, 16),
	"gpt3-760m":  gpt3("gpt3-760m", 24, 1536, 16),
	"gpt3-1.3b":  gpt3("gpt3-1.3b", 24, 2048, 16),
	"gpt3-2.7b":  gpt3("gpt3-2.7b", 32, 2560, 32),
	"gpt3-6.7b":  gpt3("gpt3-6.7b", 32, 4096, 32),
	"gpt3-13b":   gpt3("gpt3-13b", 40, 5120, 40),
	"gpt3-175b":  gpt3("gpt3-175b", 96, 12288, 96),
	"llama2-7b":  llama("llama2-7b", 32, 4096, 32, 32, 11008, 4096, 32000),
	"llama2-13b": llama("llama2-13b", 40, 5120, 40, 40, 13824, 4096, 32000),
	"llama2-70b": llama("llama2-70b", 80, 8192, 64, 8, 28672, 4096, 32000),
	"llama3-8b":  llama("llama3-8b", 32, 4096, 32, 8, 14336, 8192, 128256),
	"llama3-70b": llama("llama3-70b", 80, 8192, 64, 8, 28672, 8192, 128256),
	// Mixture-of-experts presets; shapes from each model's Hugging Face
	// config.json (sources and published counts in moe_presets_test.go).
	"mixtral-8x7b":  mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32000),
	"mixtral-8x22b": mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 32000),
	"qwen3-30b-a3b": qwen3MoE(),
	// DeepSeek-V2-Lite's MoE shape (27 layers, the first dense with FFN
	// 10944; 64 routed experts of 1408, 2 shared, top-6; vocab 102400).
	// Its multi-latent attention is not modelled: attention here is GQA
	// with 8 groups of 128 channels, which has 12.6M parameters per layer
	// against MLA's 13.8M.
	"deepseek-v2-lite-style": {Name: "deepseek-v2-lite-style", NumLayers: 27, Hidden: 2048, Heads: 16, QueryGroups: 8,
		KVChannels: 128, FFNHidden: 10944, SwiGLU: true, SeqLength: 4096, Vocab: 102400, MaxPositionEmbeddings: 4096,
		UntieEmbeddings: true, PositionEmbedding: "rope",
		MoE: MoE{NumExperts: 64, TopK: 6, FFNHidden: 1408, SharedFFN: 2816, DenseFirst: 1}},
	"gpt-oss-20b":  gptOSS("gpt-oss-20b", 24, 32),
	"gpt-oss-120b": gptOSS("gpt-oss-120b", 36, 128),
}

// mixtral: Mistral's config.json (num_local_experts 8, num_experts_per_tok
// 2, GQA with 8 KV heads of 128, SwiGLU experts, untied, vocab 32000).
// Sequence 4096 is a training choice (the model allows 32k/64k).
func mixtral(name string, layers, hidden, heads, ffn, vocab int) Model {
	return Model{Name: name, NumLayers: layers, Hidden: hidden, Heads: heads, QueryGroups: 8, FFNHidden: ffn,
		SwiGLU: true, SeqLength: 4096, Vocab: vocab, MaxPositionEmbeddings: 4096, UntieEmbeddings: true,
		PositionEmbedding: "rope", MoE: MoE{NumExperts: 8, TopK: 2}}
}

// qwen3MoE is Qwen3-30B-A3B: 48 layers, hidden 2048, 32 heads of 128 with
// 4 KV groups, 128 experts of 768, top-8, every layer MoE, vocab 151936,
// untied. FFNHidden 6144 is the dense MLP size Megatron recipes pass (no
// layer uses it).
func qwen3MoE() Model {
	return Model{Name: "qwen3-30b-a3b", NumLayers: 48, Hidden: 2048, Heads: 32, QueryGroups: 4, KVChannels: 128,
		FFNHidden: 6144, SwiGLU: true, SeqLength: 4096, Vocab: 151936, MaxPositionEmbeddings: 4096,
		UntieEmbeddings: true, PositionEmbedding: "rope", MoE: MoE{NumExperts: 128, TopK: 8, FFNHidden: 768}}
}

// gptOSS is OpenAI's gpt-oss: hidden 2880, 64 heads of 64 with 8 KV
// groups, experts of 2880 (SwiGLU), top-4, vocab 201088, untied. Its
// sliding-window layers and attention sinks are priced as full attention.
func gptOSS(name string, layers, experts int) Model {
	return Model{Name: name, NumLayers: layers, Hidden: 2880, Heads: 64, QueryGroups: 8, KVChannels: 64,
		FFNHidden: 2880, SwiGLU: true, SeqLength: 4096, Vocab: 201088, MaxPositionEmbeddings: 4096,
		UntieEmbeddings: true, PositionEmbedding: "rope", MoE: MoE{NumExperts: experts, TopK: 4}}
}

func gpt3(name string, layers, hidden, heads int) Model {
	return Model{Name: name, NumLayers: layers, Hidden: hidden, Heads: heads,
		FFNHidden: 4 * hidden, SeqLength: 2048, Vocab: 50257, MaxPositionEmbeddings: 2048}
}

func llama(name string, layers, hidden, heads, groups, ffn, seq, vocab int) Model {
	return Model{Name: name, NumLayers: layers, Hidden: hidden, Heads: heads, QueryGroups: groups,
		FFNHidden: ffn, SwiGLU: true, SeqLength: seq, Vocab: vocab, MaxPositionEmbeddings: seq,
		UntieEmbeddings: true, PositionEmbedding: "rope"}
}

// Preset returns a built-in model shape by name (e.g. "gpt3-13b",
// "llama2-70b"); case and a "B"/"b" suffix spelling do not matter.
func Preset(name string) (Model, error) {
	if m, ok := presets[strings.ToLower(strings.TrimSpace(name))]; ok {
		return m, nil
	}
	return Model{}, fmt.Errorf("unknown model preset %q; choose one of %s or pass a model YAML file",
		name, strings.Join(PresetNames(), ", "))
}

// PresetNames lists the built-in model names, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// PaddedVocab is the vocabulary Megatron allocates with tensor parallel size
// tp: rounded up to a multiple of VocabDivisibleBy (default 128) times tp,
// as Megatron's _vocab_size_with_padding does.
func (m Model) PaddedVocab(tp int) int {
	if tp < 1 {
		tp = 1
	}
	q := 128 * tp
	if m.VocabDivisibleBy > 0 {
		q = m.VocabDivisibleBy * tp
	}
	return (m.Vocab + q - 1) / q * q
}
