package tokenizer

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// SentencePiece's ModelProto (sentencepiece_model.proto): field 1 is the
// repeated pieces, field 2 the TrainerSpec, whose unk/bos/eos/pad ids are
// fields 40-43 (defaults 0, 1, 2, -1).
const (
	spPieces      = 1
	spTrainerSpec = 2
	spPiece       = 1 // SentencePiece.piece
	spBosID       = 41
	spEosID       = 42
	spPadID       = 43
)

// spModel is what Megatron's vocabulary size depends on.
type spModel struct {
	pieces        []string
	bos, eos, pad int
}

func (r Reader) sentencePiece(model string, withSpecials bool, extraIDs int) (int, error) {
	data, err := r.read(model)
	if err != nil {
		return 0, fmt.Errorf("--tokenizer-model %s: %w", model, err)
	}
	if data == nil {
		return 0, nil
	}
	m, err := parseSentencePiece(data)
	if err != nil {
		return 0, fmt.Errorf("--tokenizer-model %s: not a SentencePiece model: %w", model, err)
	}
	return m.size(extraIDs, withSpecials), nil
}

// size is Megatron's vocab_size: the piece count for GPTSentencePiece and
// Llama2 tokenizers; _SentencePieceTokenizer (withSpecials) also adds
// <CLS>, <SEP>, <EOD>, <MASK>, the pad/bos/eos pieces (<PAD>/<BOS>/<EOS>
// when the id is unset) and <extra_id_N>, each only if not already a piece.
func (m spModel) size(extraIDs int, withSpecials bool) int {
	if !withSpecials {
		return len(m.pieces)
	}
	vocab := map[string]bool{}
	for _, p := range m.pieces {
		vocab[p] = true
	}
	add := func(t string) { vocab[t] = true }
	for _, t := range []string{"<CLS>", "<SEP>", "<EOD>", "<MASK>"} {
		add(t)
	}
	for _, s := range []struct {
		id   int
		name string
	}{{m.pad, "<PAD>"}, {m.bos, "<BOS>"}, {m.eos, "<EOS>"}} {
		if s.id >= 0 && s.id < len(m.pieces) {
			add(m.pieces[s.id])
		} else {
			add(s.name)
		}
	}
	for i := 0; i < extraIDs; i++ {
		add(fmt.Sprintf("<extra_id_%d>", i))
	}
	return len(vocab)
}

func parseSentencePiece(data []byte) (spModel, error) {
	m := spModel{bos: 1, eos: 2, pad: -1}
	err := eachField(data, func(num int, wire int, v uint64, b []byte) error {
		switch {
		case num == spPieces && wire == 2:
			piece := ""
			if err := eachField(b, func(n, w int, _ uint64, pb []byte) error {
				if n == spPiece && w == 2 {
					piece = string(pb)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("piece %d: %w", len(m.pieces), err)
			}
			m.pieces = append(m.pieces, piece)
		case num == spTrainerSpec && wire == 2:
			return eachField(b, func(n, w int, tv uint64, _ []byte) error {
				if w != 0 {
					return nil
				}
				switch n {
				case spBosID:
					m.bos = int(int32(tv))
				case spEosID:
					m.eos = int(int32(tv))
				case spPadID:
					m.pad = int(int32(tv))
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return spModel{}, err
	}
	if len(m.pieces) == 0 {
		return spModel{}, errors.New("no pieces")
	}
	return m, nil
}

// eachField walks one protobuf message: fn gets each field's number, wire
// type, varint value (wire 0) or bytes (wire 2). Fixed-width fields are
// skipped; groups are not used by SentencePiece and are an error.
func eachField(data []byte, fn func(num, wire int, v uint64, b []byte) error) error {
	for i := 0; i < len(data); {
		key, n := binary.Uvarint(data[i:])
		if n <= 0 {
			return fmt.Errorf("bad field key at byte %d", i)
		}
		i += n
		num, wire := int(key>>3), int(key&7)
		var v uint64
		var b []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(data[i:])
			if n <= 0 {
				return fmt.Errorf("bad varint at byte %d", i)
			}
			i += n
		case 1:
			i += 8
		case 5:
			i += 4
		case 2:
			l, n := binary.Uvarint(data[i:])
			if n <= 0 || l > uint64(len(data)-i-n) {
				return fmt.Errorf("bad length at byte %d", i)
			}
			i += n
			b = data[i : i+int(l)]
			i += int(l)
		default:
			return fmt.Errorf("unsupported wire type %d at byte %d", wire, i)
		}
		if i > len(data) {
			return errors.New("truncated")
		}
		if num == 0 {
			return errors.New("field number 0")
		}
		if err := fn(num, wire, v, b); err != nil {
			return err
		}
	}
	return nil
}
