package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseModelFile(t *testing.T) {
	doc := `
name: my-7b
num_layers: 32
hidden_size: 4096
num_attention_heads: 32
num_query_groups: 8
ffn_hidden_size: 14336
swiglu: true
seq_length: 4096
vocab_size: 128256
untie_embeddings_and_output_weights: true
`
	m, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Model{Name: "my-7b", NumLayers: 32, Hidden: 4096, Heads: 32, QueryGroups: 8, FFNHidden: 14336,
		SwiGLU: true, SeqLength: 4096, Vocab: 128256, MaxPositionEmbeddings: 4096, UntieEmbeddings: true}
	if m != want {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
}

func TestParseModelFileErrors(t *testing.T) {
	base := "num_layers: 24\nhidden_size: 1024\nnum_attention_heads: 16\nseq_length: 2048\nvocab_size: 50257\n"
	cases := []struct{ name, old, new, want string }{
		{"heads do not divide hidden", "num_attention_heads: 16", "num_attention_heads: 12", "hidden_size (line 2, column 14): 1024 is not divisible by num_attention_heads 12"},
		{"groups do not divide heads", "seq_length", "num_query_groups: 5\nseq_length", "num_query_groups (line 4, column 19): num_attention_heads 16 is not divisible by it (5)"},
		{"negative layers", "num_layers: 24", "num_layers: -2", "num_layers (line 1, column 13): must be 1..4096, got -2"},
		{"missing hidden", "hidden_size: 1024\n", "", "hidden_size: must be 1..1048576, got 0"},
		{"typo", "vocab_size", "vocab_sise", `vocab_sise (line 5, column 1): unknown field "vocab_sise"; the fields here are name, num_layers,`},
		{"malformed", "seq_length: 2048", "seq_length: [2048", "line"},
		{"short positions", "seq_length", "max_position_embeddings: 1024\nseq_length", "max_position_embeddings (line 4, column 26): 1024 is below seq_length 2048"},
		{"float hidden", "hidden_size: 1024", "hidden_size: 2048.7", "model file: hidden_size (line 2, column 14): got 2048.7 (not a whole number); want an integer"},
		{"quoted bool", "seq_length", "swiglu: \"yes\"\nseq_length", `model file: swiglu (line 4, column 9): got the string "yes"; want true or false (unquoted)`},
		{"yes bool", "seq_length", "swiglu: yes\nseq_length", `model file: swiglu (line 4, column 9): got the string "yes"; want true or false (unquoted)`},
		{"quoted int", "num_layers: 24", "num_layers: \"24\"", `model file: num_layers (line 1, column 13): got the string "24"; want an integer`},
		{"huge layers", "num_layers: 24", "num_layers: 99999999999", `model file: num_layers (line 1, column 13): 99999999999 is out of range; want an integer below 2^31`},
		{"list for int", "num_layers: 24", "num_layers: [24]", `model file: num_layers (line 1, column 13): got a list; want an integer`},
		{"huge hidden", "hidden_size: 1024", "hidden_size: 2000000000", `hidden_size (line 2, column 14): must be 1..1048576, got 2000000000`},
		{"negative ffn", "seq_length", "ffn_hidden_size: -1\nseq_length", "ffn_hidden_size (line 4, column 18): must be 0..4194304, got -1"},
		// Issue 31: a capacity factor is finite and in limits.CapacityFactor.
		{"nan capacity", "seq_length", "num_experts: 8\nmoe_router_topk: 2\nmoe_expert_capacity_factor: .nan\nseq_length", "moe_expert_capacity_factor (line 6, column 29): got .nan; want a finite number"},
		{"tiny capacity", "seq_length", "num_experts: 8\nmoe_router_topk: 2\nmoe_expert_capacity_factor: 1e-300\nseq_length", "moe_expert_capacity_factor (line 6, column 29): must be 0 (not given) or a number from 0.01 to 64, got 1e-300 (0: dropless)"},
	}
	for _, c := range cases {
		doc := strings.Replace(base, c.old, c.new, 1)
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Parse([]byte(base)); err != nil {
		t.Errorf("base: %v", err)
	}
}

// TestExampleModelFilesMatchPresets keeps examples/models/*.yaml (the
// documented format) in step with the built-in presets of the same name.
func TestExampleModelFilesMatchPresets(t *testing.T) {
	files, _ := filepath.Glob("../../examples/models/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples/models/*.yaml")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		p, err := Preset(m.Name)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		} else if m != p {
			t.Errorf("%s differs from preset:\n%+v\n%+v", f, m, p)
		}
	}
}

// attention_dropout and hidden_dropout (Megatron's --attention-dropout,
// --hidden-dropout) default to Megatron's 0.1 and are probabilities.
func TestParseModelFileDropout(t *testing.T) {
	base := "num_layers: 24\nhidden_size: 1024\nnum_attention_heads: 16\nseq_length: 2048\nvocab_size: 50257\n"
	m, err := Parse([]byte(base))
	if err != nil || m.AttentionDropoutP() != 0.1 || m.HiddenDropoutP() != 0.1 {
		t.Fatalf("unset: attention %g, hidden %g, err %v; want Megatron's 0.1 both", m.AttentionDropoutP(), m.HiddenDropoutP(), err)
	}
	m, err = Parse([]byte(base + "attention_dropout: 0.0\nhidden_dropout: 0\n"))
	if err != nil || m.AttentionDropoutP() != 0 || m.HiddenDropoutP() != 0 {
		t.Fatalf("0.0 and 0: attention %g, hidden %g, err %v; want 0 both", m.AttentionDropoutP(), m.HiddenDropoutP(), err)
	}
	if _, err := Parse([]byte(base + "hidden_dropout: 1.5\n")); err == nil || !strings.Contains(err.Error(), "hidden_dropout (line 6, column 17): must be a probability in [0, 1), got 1.5") {
		t.Errorf("hidden_dropout 1.5: error %v", err)
	}
}
