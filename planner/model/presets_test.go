package model

import (
	"math"
	"strings"
	"testing"
)

// Published totals: GPT-3 sizes from Brown et al. 2020 Table 2.1 (the table's
// names; the paper counts learned position embeddings and biases, which
// Model.Parameters leaves out, hence the 2% tolerance); Llama-2 6.74B /
// 13.02B / 68.98B from the HF configs' parameter counts (Touvron et al.
// 2023 Table 1 rounds to 7/13/70B); Llama-3 8.03B / 70.55B (Meta model cards).
func TestPresetParametersMatchPublished(t *testing.T) {
	cases := []struct {
		name      string
		published float64
		tol       float64
	}{
		{"gpt3-125m", 125e6, 0.02},
		{"gpt3-350m", 350e6, 0.02},
		{"gpt3-760m", 760e6, 0.02},
		{"gpt3-1.3b", 1.3e9, 0.02},
		{"gpt3-2.7b", 2.7e9, 0.025}, // the label rounds up: with biases and positions it is 2.65B
		{"gpt3-6.7b", 6.7e9, 0.02},
		{"gpt3-13b", 13.0e9, 0.02},
		{"gpt3-175b", 175e9, 0.01},
		{"llama2-7b", 6.738e9, 0.01},
		{"llama2-13b", 13.016e9, 0.01},
		{"llama2-70b", 68.977e9, 0.01},
		{"llama3-8b", 8.03e9, 0.01},
		{"llama3-70b", 70.55e9, 0.01},
	}
	for _, c := range cases {
		m, err := Preset(c.name)
		if err != nil {
			t.Fatal(err)
		}
		got := float64(m.Parameters())
		if rel := math.Abs(got-c.published) / c.published; rel > c.tol {
			t.Errorf("%s: %.4gB parameters, published %.4gB (off by %.1f%%)", c.name, got/1e9, c.published/1e9, 100*rel)
		}
		if err := m.Validate(); err != nil {
			t.Errorf("%s: preset invalid: %v", c.name, err)
		}
	}
	if len(PresetNames()) != len(cases)+6 { // + the MoE presets (moe_presets_test.go)
		t.Errorf("PresetNames has %d entries, the table %d", len(PresetNames()), len(cases))
	}
}

func TestPresetUnknownNamesChoices(t *testing.T) {
	_, err := Preset("gpt4")
	if err == nil || !strings.Contains(err.Error(), `"gpt4"`) || !strings.Contains(err.Error(), "llama3-70b") {
		t.Errorf("error = %v", err)
	}
	if m, err := Preset(" GPT3-13B "); err != nil || m.Hidden != 5120 {
		t.Errorf("case-insensitive lookup: %+v %v", m, err)
	}
}

func TestPaddedVocab(t *testing.T) {
	m := Model{Vocab: 50257}
	for _, c := range []struct{ tp, want int }{{1, 50304}, {2, 50432}, {4, 50688}, {8, 51200}} {
		if got := m.PaddedVocab(c.tp); got != c.want {
			t.Errorf("PaddedVocab(%d) = %d, want %d", c.tp, got, c.want)
		}
	}
}
