package model

// Model is a decoder-only transformer's shape.
type Model struct {
	Name                  string `yaml:"name" json:"name"`
	NumLayers             int    `yaml:"num_layers" json:"num_layers"`
	Hidden                int    `yaml:"hidden_size" json:"hidden_size"`
	Heads                 int    `yaml:"num_attention_heads" json:"num_attention_heads"`
	QueryGroups           int    `yaml:"num_query_groups,omitempty" json:"num_query_groups,omitempty"` // 0 = Heads (MHA)
	FFNHidden             int    `yaml:"ffn_hidden_size,omitempty" json:"ffn_hidden_size,omitempty"`   // 0 = 4*Hidden
	SwiGLU                bool   `yaml:"swiglu,omitempty" json:"swiglu,omitempty"`
	SeqLength             int    `yaml:"seq_length" json:"seq_length"`
	Vocab                 int    `yaml:"vocab_size" json:"vocab_size"`
	MaxPositionEmbeddings int    `yaml:"max_position_embeddings,omitempty" json:"max_position_embeddings,omitempty"`
	UntieEmbeddings       bool   `yaml:"untie_embeddings_and_output_weights,omitempty" json:"untie_embeddings_and_output_weights,omitempty"`
	// VocabDivisibleBy is --make-vocab-size-divisible-by (0 = Megatron's
	// 128): the vocabulary is padded to a multiple of it times TP.
	VocabDivisibleBy int `yaml:"make_vocab_size_divisible_by,omitempty" json:"make_vocab_size_divisible_by,omitempty"`
	// PositionEmbedding is Megatron's --position-embedding-type ("" =
	// learned_absolute); it changes no estimate, but --model renders it so
	// the job trains the planned model.
	PositionEmbedding string `yaml:"position_embedding_type,omitempty" json:"position_embedding_type,omitempty"`
	// MaterializedAttention: attention runs unfused and stores its s x s
	// score matrices (Megatron's --attention-backend unfused/local). The
	// default, false, is flash/fused attention (Megatron with Transformer
	// Engine, DeepSpeed with flash-attn), which never stores them.
	MaterializedAttention bool `yaml:"materialized_attention,omitempty" json:"materialized_attention,omitempty"`
	// KVChannels is the attention head size (Megatron's --kv-channels, HF's
	// head_dim); 0 = Hidden/Heads. Qwen3 and GPT-OSS use heads x head size
	// wider than the hidden size.
	KVChannels int `yaml:"kv_channels,omitempty" json:"kv_channels,omitempty"`
	// AttentionDropout and HiddenDropout are Megatron's --attention-dropout
	// and --hidden-dropout; nil is Megatron's default, 0.1. A dropout with
	// p > 0 keeps a 1-byte mask per element for backward (and unfused
	// attention its dropped-out probabilities too); at p = 0 PyTorch's
	// dropout returns its input and keeps nothing. Megatron-LM's Llama 3
	// scripts set both to 0.
	AttentionDropout *float64 `yaml:"attention_dropout,omitempty" json:"attention_dropout,omitempty"`
	HiddenDropout    *float64 `yaml:"hidden_dropout,omitempty" json:"hidden_dropout,omitempty"`
	MoE              `yaml:",inline" json:",inline"`
}

// defaultDropout is Megatron-LM's --attention-dropout and --hidden-dropout.
const defaultDropout = 0.1

// AttentionDropoutP is the attention dropout probability (default 0.1).
func (m Model) AttentionDropoutP() float64 { return dropoutP(m.AttentionDropout) }

// HiddenDropoutP is the hidden (and embedding) dropout probability
// (default 0.1).
func (m Model) HiddenDropoutP() float64 { return dropoutP(m.HiddenDropout) }

func dropoutP(p *float64) float64 {
	if p == nil {
		return defaultDropout
	}
	return *p
}

// WithoutDropout is m with both dropouts at 0, as Megatron-LM's Llama 3
// scripts run (--attention-dropout 0.0 --hidden-dropout 0.0).
func (m Model) WithoutDropout() Model {
	zero := 0.0
	m.AttentionDropout, m.HiddenDropout = &zero, &zero
	return m
}

// MoE is the mixture-of-experts part of a model (Megatron-Core's MoE
// layer): NumExperts = 0 is a dense model. An MoE layer replaces the MLP
// by a router (a Hidden x NumExperts linear, replicated over TP), TopK
// routed experts per token out of NumExperts, each an MLP of FFNHidden
// (gated when the model is SwiGLU), and optionally a shared-expert MLP of
// SharedFFN every token goes through. Which layers are MoE follows
// --moe-layer-freq: layer i (0-based) is MoE when i >= DenseFirst and
// i % LayerFreq == LayerPhase.
type MoE struct {
	NumExperts int `yaml:"num_experts,omitempty" json:"num_experts,omitempty"`
	// TopK is --moe-router-topk; 0 = Megatron's default 2.
	TopK int `yaml:"moe_router_topk,omitempty" json:"moe_router_topk,omitempty"`
	// FFNHidden is --moe-ffn-hidden-size; 0 = the model's FFN size.
	FFNHidden int `yaml:"moe_ffn_hidden_size,omitempty" json:"moe_ffn_hidden_size,omitempty"`
	// SharedFFN is --moe-shared-expert-intermediate-size (all shared
	// experts together); 0 = none.
	SharedFFN int `yaml:"moe_shared_expert_intermediate_size,omitempty" json:"moe_shared_expert_intermediate_size,omitempty"`
	// LayerFreq is the integer form of --moe-layer-freq (0 = 1: every layer).
	LayerFreq int `yaml:"moe_layer_freq,omitempty" json:"moe_layer_freq,omitempty"`
	// DenseFirst is how many leading layers are dense (the list form
	// --moe-layer-freq "([0]*k+[1]*n)", DeepSeek's first_k_dense_replace).
	DenseFirst int `yaml:"moe_dense_first_layers,omitempty" json:"moe_dense_first_layers,omitempty"`
	// LayerPhase is which layer of every LayerFreq is MoE: 0 in
	// Megatron-LM (layers 0, N, 2N...); N-1 in Megatron-DeepSpeed, whose
	// --expert-interval N makes the 1-based layer numbers divisible by N
	// MoE (get_num_experts_per_layer: layers N-1, 2N-1... 0-based).
	LayerPhase int `yaml:"moe_layer_phase,omitempty" json:"moe_layer_phase,omitempty"`
	// CapacityFactor is --moe-expert-capacity-factor: each expert takes at
	// most CapacityFactor x its even share of the routed tokens and drops
	// the rest; 0 = dropless (Megatron's default), priced at the even
	// share (perfect balance, as Megatron-Bridge's benchmarks force).
	CapacityFactor float64 `yaml:"moe_expert_capacity_factor,omitempty" json:"moe_expert_capacity_factor,omitempty"`
}

// FFN returns the FFN hidden size. When unset it is Megatron's default:
// 4*Hidden, or for SwiGLU 2/3 of that rounded down to a multiple of 64 (so
// the gated MLP keeps about the same parameter count).
func (m Model) FFN() int {
	if m.FFNHidden > 0 {
		return m.FFNHidden
	}
	if m.SwiGLU {
		return 4 * m.Hidden * 2 / 3 / 64 * 64
	}
	return 4 * m.Hidden
}

// HeadDim is the attention head size: KVChannels, or Hidden/Heads.
func (m Model) HeadDim() int {
	if m.KVChannels > 0 {
		return m.KVChannels
	}
	if m.Heads <= 0 {
		return 0
	}
	return m.Hidden / m.Heads
}

// QueryDim is the width of the query projection and of the attention
// output fed to the output projection: heads x head size.
func (m Model) QueryDim() int { return m.Heads * m.HeadDim() }

// IsMoE reports whether the model has expert layers.
func (m Model) IsMoE() bool { return m.NumExperts > 0 }

// MoETopK is the routed experts per token (Megatron's default 2).
func (m Model) MoETopK() int {
	if m.TopK > 0 {
		return m.TopK
	}
	return 2
}

// ExpertFFN is one routed expert's FFN size.
func (m Model) ExpertFFN() int {
	if m.MoE.FFNHidden > 0 {
		return m.MoE.FFNHidden
	}
	return m.FFN()
}

// IsMoELayer reports whether decoder layer i (0-based) is an MoE layer.
func (m Model) IsMoELayer(i int) bool {
	if !m.IsMoE() || i < m.DenseFirst {
		return false
	}
	return i%max(m.LayerFreq, 1) == m.LayerPhase
}

// MoELayersIn counts the MoE layers among layers [from, from+n).
func (m Model) MoELayersIn(from, n int) int {
	if !m.IsMoE() {
		return 0 // the planner asks for every stage of every candidate
	}
	c := 0
	for i := from; i < from+n; i++ {
		if m.IsMoELayer(i) {
			c++
		}
	}
	return c
}

// MoELayers is the number of MoE layers.
func (m Model) MoELayers() int { return m.MoELayersIn(0, m.NumLayers) }

func (m Model) MLPMats() int64 {
	if m.SwiGLU {
		return 3
	}
	return 2
}

// AttentionParameters is one layer's attention (Q, K, V, output
// projection, GQA-aware, with the model's head size) plus its two norms.
func (m Model) AttentionParameters() int64 {
	h := int64(m.Hidden)
	q := int64(m.QueryDim())
	kv := int64(m.HeadDim()) * int64(m.Groups())
	return h*q + 2*h*kv + q*h + 2*h
}

// ExpertParameters is one routed expert's MLP.
func (m Model) ExpertParameters() int64 {
	return m.MLPMats() * int64(m.Hidden) * int64(m.ExpertFFN())
}

// MoEDenseParameters is the part of an MoE layer every token uses besides
// attention: the router and the shared experts.
func (m Model) MoEDenseParameters() int64 {
	return int64(m.NumExperts)*int64(m.Hidden) + m.MLPMats()*int64(m.Hidden)*int64(m.SharedFFN)
}

// MoELayerParameters is one MoE layer: attention, router, shared and all
// routed experts.
func (m Model) MoELayerParameters() int64 {
	return m.AttentionParameters() + m.MoEDenseParameters() + int64(m.NumExperts)*m.ExpertParameters()
}

// ActiveParameters is what one token uses: every parameter of a dense
// model; in an MoE layer only TopK routed experts. Both embedding
// matrices count (publishers differ: some leave the input embedding out).
func (m Model) ActiveParameters() int64 {
	moe := int64(m.MoELayers())
	dense := int64(m.NumLayers) - moe
	p := dense*m.LayerParameters() + moe*(m.AttentionParameters()+m.MoEDenseParameters()+int64(m.MoETopK())*m.ExpertParameters())
	return p + m.nonLayerParameters()
}

func (m Model) nonLayerParameters() int64 {
	p := m.EmbeddingParameters() + int64(m.Hidden)
	if m.UntieEmbeddings {
		p += m.EmbeddingParameters()
	}
	return p
}

// Groups returns the number of KV groups (Heads when unset).
func (m Model) Groups() int {
	if m.QueryGroups > 0 {
		return m.QueryGroups
	}
	return m.Heads
}

// LayerParameters is the parameter count of one dense decoder layer
// (attention with GQA, MLP with optional SwiGLU, two norms, biases
// ignored); MoELayerParameters is an MoE layer's.
func (m Model) LayerParameters() int64 {
	return m.AttentionParameters() + m.MLPMats()*int64(m.Hidden)*int64(m.FFN())
}

// EmbeddingParameters is the input embedding (plus position embeddings
// when the model has learned ones is ignored: modern presets use RoPE).
func (m Model) EmbeddingParameters() int64 { return int64(m.Vocab) * int64(m.Hidden) }

// Parameters is the total parameter count; an untied output layer adds a
// second vocabulary matrix.
func (m Model) Parameters() int64 {
	moe := int64(m.MoELayers())
	return (int64(m.NumLayers)-moe)*m.LayerParameters() + moe*m.MoELayerParameters() + m.nonLayerParameters()
}

// LayersParameters is the parameter count of decoder layers [from, from+n).
func (m Model) LayersParameters(from, n int) int64 {
	moe := int64(m.MoELayersIn(from, n))
	return (int64(n)-moe)*m.LayerParameters() + moe*m.MoELayerParameters()
}

// CapacityFactorOr1 is the capacity factor, 1 when dropless.
func (m Model) CapacityFactorOr1() float64 {
	if m.CapacityFactor > 0 {
		return m.CapacityFactor
	}
	return 1
}
