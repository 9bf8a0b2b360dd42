package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"
)

// The expected sizes are what Megatron-LM's tokenizers report for these
// files (testdata/gen.py computes them with the real sentencepiece library).
func TestVocabAsMegatronReadsIt(t *testing.T) {
	r := Reader{Dir: "testdata"}
	cases := []struct {
		name string
		args megatron.TokenizerArgs
		want int
	}{
		{"GPT-2 vocab.json entries", megatron.TokenizerArgs{Type: "GPT2BPETokenizer", VocabFile: "gpt2-vocab.json"}, 300},
		{"GPT-2 vocab not readable here: the published 50257", megatron.TokenizerArgs{Type: "GPT2BPETokenizer", VocabFile: "/nonexistent/gpt2-vocab.json"}, 50257},
		{"GPTSentencePieceTokenizer: piece count", megatron.TokenizerArgs{Type: "GPTSentencePieceTokenizer", Model: "sp-320.model"}, 320},
		{"Llama2Tokenizer: piece count", megatron.TokenizerArgs{Type: "Llama2Tokenizer", Model: "sp-pad.model"}, 300},
		{"SentencePieceTokenizer adds specials and <PAD> (pad unset)", megatron.TokenizerArgs{Type: "SentencePieceTokenizer", Model: "sp-320.model", ExtraIDs: 2}, 327},
		{"SentencePieceTokenizer keeps the model's own pad piece", megatron.TokenizerArgs{Type: "SentencePieceTokenizer", Model: "sp-pad.model", ExtraIDs: 2}, 306},
		{"HuggingFace tokenizer.json: vocab plus new added tokens", megatron.TokenizerArgs{Type: "HuggingFaceTokenizer", Model: "hf"}, 7},
		{"HuggingFace model dir with only config.json", megatron.TokenizerArgs{Type: "HuggingFaceTokenizer", Model: "hf-config"}, 32000},
		{"HuggingFace hub name: cannot tell", megatron.TokenizerArgs{Type: "HuggingFaceTokenizer", Model: "meta-llama/Llama-2-7b-hf"}, 0},
		{"SentencePiece model only on the hosts: cannot tell", megatron.TokenizerArgs{Type: "Llama2Tokenizer", Model: "/data/tokenizer.model"}, 0},
	}
	for _, c := range cases {
		n, src, err := r.Vocab(c.args)
		if err != nil || n != c.want {
			t.Errorf("%s: got %d (%s), %v; want %d", c.name, n, src, err, c.want)
		}
	}
}

func TestVocabBadFilesNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.model"), []byte("not a protobuf \xff\xff\xff"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "vocab.json"), []byte(`["a","b"]`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Reader{Dir: dir}
	for _, c := range []struct {
		args megatron.TokenizerArgs
		want string
	}{
		{megatron.TokenizerArgs{Type: "Llama2Tokenizer", Model: "bad.model"}, "--tokenizer-model bad.model: not a SentencePiece model"},
		{megatron.TokenizerArgs{Type: "GPT2BPETokenizer", VocabFile: "vocab.json"}, "--vocab-file vocab.json: not a GPT-2 vocab.json"},
	} {
		_, _, err := r.Vocab(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// Megatron pads the tokenizer's size to --make-vocab-size-divisible-by x TP.
func TestMegatronArgsDeriveAndPadTheVocab(t *testing.T) {
	r := Reader{Dir: "testdata"}
	base := "--num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
	cases := []struct {
		args       string
		vocab      int
		tp, padded int
	}{
		{base + "--vocab-file gpt2-vocab.json --merge-file merges.txt", 300, 2, 512},
		{base + "--tokenizer-type GPTSentencePieceTokenizer --tokenizer-model sp-320.model --make-vocab-size-divisible-by 64", 320, 4, 512},
		{base + "--tokenizer-type Llama2Tokenizer --tokenizer-model sp-pad.model --make-vocab-size-divisible-by 1", 300, 8, 304},
		{base + "--tokenizer-type NullTokenizer --vocab-size 1000", 1001, 1, 1024},
		{base + "--tokenizer-type HuggingFaceTokenizer --tokenizer-model hf-config", 32000, 8, 32768},
	}
	for _, c := range cases {
		m, _, _, err := megatron.ModelFromArgsVocab(strings.Fields(c.args), r.Vocab)
		if err != nil || m.Vocab != c.vocab || m.PaddedVocab(c.tp) != c.padded {
			t.Errorf("%s: vocab %d padded(tp %d) %d, err %v; want %d, %d", c.args, m.Vocab, c.tp, m.PaddedVocab(c.tp), err, c.vocab, c.padded)
		}
	}
	_, _, _, err := megatron.ModelFromArgsVocab(strings.Fields(base+"--tokenizer-type Llama2Tokenizer --tokenizer-model /data/tok.model"), r.Vocab)
	if err == nil || !strings.Contains(err.Error(), "--vocab-size") || !strings.Contains(err.Error(), "--model") {
		t.Errorf("unreadable tokenizer without --vocab-size: %v, want an error asking for --vocab-size or --model", err)
	}
}
