package planner

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

// Groups returns the number of KV groups (Heads when unset).
func (m Model) Groups() int {
	if m.QueryGroups > 0 {
		return m.QueryGroups
	}
	return m.Heads
}

// LayerParameters is the parameter count of one decoder layer (attention
// with GQA, MLP with optional SwiGLU, two norms, biases ignored).
func (m Model) LayerParameters() int64 {
	h := int64(m.Hidden)
	kvDim := h / int64(m.Heads) * int64(m.Groups())
	attn := h*h + 2*h*kvDim + h*h // Q, K, V, output projection
	mlpMats := int64(2)
	if m.SwiGLU {
		mlpMats = 3
	}
	mlp := mlpMats * h * int64(m.FFN())
	return attn + mlp + 2*h
}

// EmbeddingParameters is the input embedding (plus position embeddings
// when the model has learned ones is ignored: modern presets use RoPE).
func (m Model) EmbeddingParameters() int64 { return int64(m.Vocab) * int64(m.Hidden) }

// Parameters is the total parameter count; an untied output layer adds a
// second vocabulary matrix.
func (m Model) Parameters() int64 {
	p := int64(m.NumLayers)*m.LayerParameters() + m.EmbeddingParameters() + int64(m.Hidden)
	if m.UntieEmbeddings {
		p += m.EmbeddingParameters()
	}
	return p
}
