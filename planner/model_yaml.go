package planner

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// ParseModelFile parses and validates a model YAML document whose keys are
// Model's yaml tags (num_layers, hidden_size, num_attention_heads, ...).
// Unknown keys are errors. max_position_embeddings defaults to seq_length.
func ParseModelFile(data []byte) (Model, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var m Model
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return Model{}, errors.New("model file: empty document")
		}
		return Model{}, fmt.Errorf("model file: %w", err)
	}
	if m.MaxPositionEmbeddings == 0 {
		m.MaxPositionEmbeddings = m.SeqLength
	}
	if err := m.Validate(); err != nil {
		return Model{}, fmt.Errorf("model file: %w", err)
	}
	return m, nil
}

// Validate checks the shape Megatron would accept, naming each bad field.
func (m Model) Validate() error {
	var errs fieldErrors
	positive := func(field string, v int) {
		if v <= 0 {
			errs.add(field, "must be > 0, got %d", v)
		}
	}
	positive("num_layers", m.NumLayers)
	positive("hidden_size", m.Hidden)
	positive("num_attention_heads", m.Heads)
	positive("seq_length", m.SeqLength)
	positive("vocab_size", m.Vocab)
	nonNegativeInt(&errs, "num_query_groups", m.QueryGroups)
	nonNegativeInt(&errs, "ffn_hidden_size", m.FFNHidden)
	nonNegativeInt(&errs, "max_position_embeddings", m.MaxPositionEmbeddings)
	if m.Heads > 0 && m.Hidden > 0 && m.Hidden%m.Heads != 0 {
		errs.add("hidden_size", "%d is not divisible by num_attention_heads %d", m.Hidden, m.Heads)
	}
	if m.QueryGroups > 0 && m.Heads > 0 && m.Heads%m.QueryGroups != 0 {
		errs.add("num_query_groups", "num_attention_heads %d is not divisible by it (%d)", m.Heads, m.QueryGroups)
	}
	if m.MaxPositionEmbeddings > 0 && m.SeqLength > m.MaxPositionEmbeddings {
		errs.add("max_position_embeddings", "%d is below seq_length %d", m.MaxPositionEmbeddings, m.SeqLength)
	}
	return errs.err("invalid model")
}

func nonNegativeInt(errs *fieldErrors, field string, v int) {
	if v < 0 {
		errs.add(field, "must be >= 0, got %d", v)
	}
}
