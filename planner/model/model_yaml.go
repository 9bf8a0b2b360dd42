package model

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// Parse parses and validates a model YAML document whose keys are
// Model's yaml tags (num_layers, hidden_size, num_attention_heads, ...).
// Unknown keys are errors. max_position_embeddings defaults to seq_length.
// Non-integers in integer fields and quoted booleans are errors; errors
// name the field and its line and column.
func Parse(data []byte) (Model, error) {
	var m Model
	pos, err := yamlcheck.Decode(data, &m, nil)
	if err != nil {
		return Model{}, fmt.Errorf("model file: %w", err)
	}
	if m.MaxPositionEmbeddings == 0 {
		m.MaxPositionEmbeddings = m.SeqLength
	}
	errs := m.validate()
	errs.Locate(pos)
	if err := errs.Err("model file"); err != nil {
		return Model{}, err
	}
	return m, nil
}

// Validate checks the shape Megatron would accept, naming each bad field.
// Sizes are bounded (internal/limits) so no arithmetic on them overflows.
func (m Model) Validate() error { return m.validate().Err("invalid model") }

func (m Model) validate() yamlcheck.Problems {
	var errs yamlcheck.Problems
	positive := func(field string, v, most int) {
		if v <= 0 || v > most {
			errs.Add(field, "must be 1..%d, got %d", most, v)
		}
	}
	positive("num_layers", m.NumLayers, limits.MaxLayers)
	positive("hidden_size", m.Hidden, limits.MaxHidden)
	positive("num_attention_heads", m.Heads, limits.MaxHeads)
	positive("seq_length", m.SeqLength, limits.MaxSeqLength)
	positive("vocab_size", m.Vocab, limits.MaxVocab)
	nonNegativeInt(&errs, "num_query_groups", m.QueryGroups, limits.MaxHeads)
	nonNegativeInt(&errs, "ffn_hidden_size", m.FFNHidden, 4*limits.MaxHidden)
	nonNegativeInt(&errs, "max_position_embeddings", m.MaxPositionEmbeddings, limits.MaxSeqLength)
	if m.Heads > 0 && m.Hidden > 0 && m.Hidden%m.Heads != 0 {
		errs.Add("hidden_size", "%d is not divisible by num_attention_heads %d", m.Hidden, m.Heads)
	}
	if m.QueryGroups > 0 && m.Heads > 0 && m.Heads%m.QueryGroups != 0 {
		errs.Add("num_query_groups", "num_attention_heads %d is not divisible by it (%d)", m.Heads, m.QueryGroups)
	}
	if m.MaxPositionEmbeddings > 0 && m.SeqLength > m.MaxPositionEmbeddings {
		errs.Add("max_position_embeddings", "%d is below seq_length %d", m.MaxPositionEmbeddings, m.SeqLength)
	}
	nonNegativeInt(&errs, "kv_channels", m.KVChannels, limits.MaxHidden)
	probability(&errs, "attention_dropout", m.AttentionDropout)
	probability(&errs, "hidden_dropout", m.HiddenDropout)
	m.validateMoE(&errs)
	return errs
}

// maxExperts bounds num_experts (DeepSeek-V3 has 256; Megatron allows any).
const maxExperts = 4096

func (m Model) validateMoE(errs *yamlcheck.Problems) {
	e := m.MoE
	nonNegativeInt(errs, "num_experts", e.NumExperts, maxExperts)
	nonNegativeInt(errs, "moe_router_topk", e.TopK, maxExperts)
	nonNegativeInt(errs, "moe_ffn_hidden_size", e.FFNHidden, 4*limits.MaxHidden)
	nonNegativeInt(errs, "moe_shared_expert_intermediate_size", e.SharedFFN, 4*limits.MaxHidden)
	nonNegativeInt(errs, "moe_layer_freq", e.LayerFreq, limits.MaxLayers)
	nonNegativeInt(errs, "moe_dense_first_layers", e.DenseFirst, limits.MaxLayers)
	if e.LayerPhase < 0 || e.LayerPhase >= max(e.LayerFreq, 1) {
		errs.Add("moe_layer_phase", "must be 0..moe_layer_freq-1 (%d), got %d", max(e.LayerFreq, 1)-1, e.LayerPhase)
	}
	if err := limits.CapacityFactor.CheckOptional(e.CapacityFactor); err != nil {
		errs.Add("moe_expert_capacity_factor", "%v (0: dropless)", err)
	}
	if e.NumExperts == 0 {
		if e.TopK != 0 || e.FFNHidden != 0 || e.SharedFFN != 0 || e.LayerFreq != 0 || e.DenseFirst != 0 || e.LayerPhase != 0 || e.CapacityFactor != 0 {
			errs.Add("num_experts", "is 0 (a dense model) but MoE fields are set; set num_experts or drop them")
		}
		return
	}
	if e.TopK > e.NumExperts {
		errs.Add("moe_router_topk", "%d is more than num_experts %d", e.TopK, e.NumExperts)
	}
	if m.NumLayers > 0 && e.DenseFirst >= m.NumLayers {
		errs.Add("moe_dense_first_layers", "%d leaves none of the %d layers MoE", e.DenseFirst, m.NumLayers)
	}
}

// probability checks an optional dropout probability: 0 <= p < 1.
func probability(errs *yamlcheck.Problems, field string, p *float64) {
	if p != nil && !(*p >= 0 && *p < 1) {
		errs.Add(field, "must be a probability in [0, 1), got %g", *p)
	}
}

func nonNegativeInt(errs *yamlcheck.Problems, field string, v, most int) {
	if v < 0 || v > most {
		errs.Add(field, "must be 0..%d, got %d", most, v)
	}
}
