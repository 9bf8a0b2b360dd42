"""Regenerates the tokenizer test files (run with Debian's python3-sentencepiece):
    /usr/bin/python3 gen.py
sp-320.model: a real SentencePiece unigram model (320 pieces, default ids:
unk 0, bos 1, eos 2, pad unset) trained on the repository's README.md.
sp-pad.model: the same with pad_id 3 (pieces <pad> at id 3), 300 pieces.
gpt2-vocab.json: a GPT-2 style byte-level vocab.json (256 byte tokens, 43
merged tokens, <|endoftext|>): 300 entries, as Megatron's GPT2Tokenizer reads it.
"""
import json
import sentencepiece as spm

text = "../../README.md"
spm.SentencePieceTrainer.train(input=text, model_prefix="sp-320", vocab_size=320, model_type="unigram",
                               character_coverage=1.0,
                               normalization_rule_name="identity")
spm.SentencePieceTrainer.train(input=text, model_prefix="sp-pad", vocab_size=300, model_type="unigram",
                               character_coverage=1.0, pad_id=3,
                               normalization_rule_name="identity")
def megatron_sp_vocab(sp, extra_ids):
    """Megatron-LM's _SentencePieceTokenizer._initalize, for its vocab_size."""
    vocab = {sp.id_to_piece(i): i for i in range(len(sp))}

    def add(t):
        if t not in vocab:
            vocab[t] = len(vocab)
    for t in ("<CLS>", "<SEP>", "<EOD>", "<MASK>"):
        add(t)
    for ident, default in ((sp.pad_id(), "<PAD>"), (sp.bos_id(), "<BOS>"), (sp.eos_id(), "<EOS>")):
        try:
            tok = sp.id_to_piece(ident)
        except IndexError:
            tok = default
        add(tok)
    for i in range(extra_ids):
        add("<extra_id_{}>".format(i))
    return len(vocab)


for name in ("sp-320", "sp-pad"):
    sp = spm.SentencePieceProcessor(model_file=name + ".model")
    print(name, "pieces", sp.get_piece_size(), "bos", sp.bos_id(), "eos", sp.eos_id(), "pad", sp.pad_id(),
          "SentencePieceTokenizer vocab_size", megatron_sp_vocab(sp, 2))


# GPT-2's bytes_to_unicode table, then merged tokens.
bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
cs = bs[:]
n = 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
enc = {chr(c): i for i, c in enumerate(cs)}
for w in ["Ġt", "Ġa", "he", "in", "re", "on", "Ġthe", "er", "Ġs", "at", "Ġw", "Ġo", "en", "Ġc", "it", "is", "an",
          "or", "es", "Ġb", "ed", "Ġf", "ing", "Ġp", "ou", "Ġan", "al", "ar", "Ġto", "Ġm", "Ġof", "Ġin", "Ġd", "Ġh",
          "Ġand", "ic", "as", "le", "Ġth", "ion", "om", "ll", "ent"]:
    enc[w] = len(enc)
enc["<|endoftext|>"] = len(enc)
with open("gpt2-vocab.json", "w") as f:
    json.dump(enc, f, ensure_ascii=False)
print("gpt2-vocab.json entries", len(enc))
