// Package tokenizer reads the vocabulary size Megatron-LM derives from a
// tokenizer's own files (GPT-2 BPE vocab.json, SentencePiece .model,
// HuggingFace tokenizer.json or config.json), so a launch without
// --vocab-size plans the embedding Megatron will really build.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
)

// GPT2DefaultVocab is the entry count of GPT-2's gpt2-vocab.json, used when
// a GPT2BPETokenizer's vocab file is not readable here.
const GPT2DefaultVocab = 50257

// Reader derives vocabulary sizes; Dir resolves relative file names (the
// launch directory or --workdir, where the ranks will start).
type Reader struct{ Dir string }

// Vocab implements megatron.VocabFunc: the tokenizer's vocab_size as
// Megatron's build_tokenizer computes it, before padding. 0 with a nil
// error means the files cannot tell (not readable here).
func (r Reader) Vocab(t megatron.TokenizerArgs) (int, string, error) {
	switch t.Type {
	case "GPT2BPETokenizer":
		return r.gpt2(t.VocabFile)
	case "GPTSentencePieceTokenizer", "Llama2Tokenizer":
		n, err := r.sentencePiece(t.Model, false, 0)
		return n, t.Model, err
	case "SentencePieceTokenizer":
		n, err := r.sentencePiece(t.Model, true, t.ExtraIDs)
		return n, t.Model, err
	case "HuggingFaceTokenizer":
		return r.huggingFace(t.Model)
	}
	return 0, "", nil
}

func (r Reader) path(p string) string {
	if p == "" || filepath.IsAbs(p) || r.Dir == "" {
		return p
	}
	return filepath.Join(r.Dir, p)
}

// read returns nil data and no error when the file is absent here.
func (r Reader) read(p string) ([]byte, error) {
	if p == "" {
		return nil, nil
	}
	data, err := inputfile.Read(r.path(p), limits.MaxTokenizerBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// gpt2 counts vocab.json's entries (Megatron: len(tokenizer.encoder)); the
// published file's 50257 when it is not here.
func (r Reader) gpt2(vocabFile string) (int, string, error) {
	data, err := r.read(vocabFile)
	if err != nil {
		return 0, "", fmt.Errorf("--vocab-file %s: %w", vocabFile, err)
	}
	if data == nil {
		return GPT2DefaultVocab, "GPT-2's published vocab (50257 entries; " + vocabFile + " is not readable here)", nil
	}
	var enc map[string]int
	if err := json.Unmarshal(data, &enc); err != nil {
		return 0, "", fmt.Errorf("--vocab-file %s: not a GPT-2 vocab.json (a JSON object of token to id): %w", vocabFile, err)
	}
	return len(enc), vocabFile, nil
}

// huggingFace reads tokenizer.json (vocabulary plus added tokens, as
// len(AutoTokenizer) counts them), else config.json's vocab_size, from the
// --tokenizer-model directory (or file).
func (r Reader) huggingFace(model string) (int, string, error) {
	if model == "" {
		return 0, "", nil
	}
	p := r.path(model)
	st, err := os.Stat(p)
	if err != nil {
		return 0, "", nil // a hub name or a path only the hosts have
	}
	tokFile, cfgFile := p, ""
	if st.IsDir() {
		tokFile, cfgFile = filepath.Join(p, "tokenizer.json"), filepath.Join(p, "config.json")
	}
	if data, err := inputfile.Read(tokFile, limits.MaxTokenizerBytes); err == nil {
		n, err := tokenizerJSONSize(data)
		if err != nil {
			return 0, "", fmt.Errorf("--tokenizer-model %s: %w", tokFile, err)
		}
		return n, tokFile, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, "", fmt.Errorf("--tokenizer-model: %w", err)
	}
	if cfgFile == "" {
		return 0, "", nil
	}
	data, err := inputfile.Read(cfgFile, limits.MaxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	} else if err != nil {
		return 0, "", fmt.Errorf("--tokenizer-model: %w", err)
	}
	var cfg struct {
		VocabSize int `json:"vocab_size"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.VocabSize <= 0 {
		return 0, "", fmt.Errorf("--tokenizer-model %s: no positive vocab_size (%v)", cfgFile, err)
	}
	return cfg.VocabSize, cfgFile, nil
}

// tokenizerJSONSize is get_vocab_size(with_added_tokens=True) of a
// HuggingFace tokenizers file: the model's vocabulary (an object for
// BPE/WordPiece/WordLevel, a list of [piece, score] for Unigram) plus added
// tokens whose ids it does not already hold.
func tokenizerJSONSize(data []byte) (int, error) {
	var f struct {
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID int `json:"id"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	ids := map[int]bool{}
	var asMap map[string]int
	var asList []json.RawMessage
	switch {
	case json.Unmarshal(f.Model.Vocab, &asMap) == nil && asMap != nil:
		for _, id := range asMap {
			ids[id] = true
		}
	case json.Unmarshal(f.Model.Vocab, &asList) == nil && asList != nil:
		for i := range asList {
			ids[i] = true
		}
	default:
		return 0, errors.New("tokenizer.json has no model.vocab")
	}
	for _, t := range f.AddedTokens {
		ids[t.ID] = true
	}
	return len(ids), nil
}
