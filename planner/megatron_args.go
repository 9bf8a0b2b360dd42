package planner

import (
	"fmt"
	"strconv"
	"strings"
)

// megatronArgs is a parsed Megatron-LM argument list: flag -> value ("" for
// switches). Both `--flag v` and `--flag=v` are accepted; the last of a
// repeated flag wins, as with argparse.
type megatronArgs map[string]string

// megatronSwitches take no value (argparse store_true).
var megatronSwitches = map[string]bool{
	"--swiglu": true, "--group-query-attention": true, "--untie-embeddings-and-output-weights": true,
	"--recompute-activations": true,
	"--sequence-parallel":     true, "--use-distributed-optimizer": true, "--optimizer-cpu-offload": true,
	"--use-rotary-position-embeddings": true, "--bf16": true, "--fp16": true, "--deepspeed": true,
	"--no-pipeline-parallel": true, "--disable-bias-linear": true, "--no-query-key-layer-scaling": true,
}

func parseMegatronArgs(args []string) megatronArgs {
	out := megatronArgs{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			out[k] = v
			continue
		}
		if megatronSwitches[a] || i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
			out[a] = ""
			continue
		}
		out[a] = args[i+1]
		i++
	}
	return out
}

func (a megatronArgs) has(flag string) bool { _, ok := a[flag]; return ok }

// int reads a positive integer flag; 0 when absent.
func (a megatronArgs) int(flag string, errs *fieldErrors) int {
	v, ok := a[flag]
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		errs.add(flag, "want a positive integer, got %q", v)
		return 0
	}
	return n
}

// megatronShapeFlags are the flags whose presence means "this argument list
// describes a model".
var megatronShapeFlags = []string{"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"}

// ModelFromMegatronArgs reads the model shape from a Megatron-LM argument
// list. found is false when the list has none of --num-layers,
// --hidden-size, --num-attention-heads, --seq-length; when it has some, the
// missing ones are an error naming them. Defaults follow Megatron:
// --num-query-groups counts only with --group-query-attention, the FFN size
// defaults as in Model.FFN, --max-position-embeddings to --seq-length. The
// vocabulary is --vocab-size, or 50257 with --tokenizer-type
// GPT2BPETokenizer (Megatron reads it from the tokenizer otherwise).
//
// fixed holds what the user pinned: --tensor-model-parallel-size,
// --pipeline-model-parallel-size, --context-parallel-size, virtual stages
// (--num-virtual-stages-per-pipeline-rank, or
// --num-layers-per-virtual-pipeline-stage converted to stages per rank),
// --micro-batch-size, --sequence-parallel, --recompute-granularity,
// --use-distributed-optimizer, --zero-stage (Megatron-DeepSpeed; otherwise
// ZeroStage is -1, free) and --optimizer-cpu-offload (ForceOffload).
// Batch sizes come from MegatronBatchArgs.
func ModelFromMegatronArgs(args []string) (m Model, fixed Constraints, found bool, err error) {
	return ModelFromMegatronArgsVocab(args, nil)
}

// TokenizerArgs are the tokenizer flags Megatron's build_tokenizer reads.
// Type is --tokenizer-type; with none given but a --vocab-file and
// --merge-file, GPT2BPETokenizer (the only tokenizer taking both).
type TokenizerArgs struct {
	Type, VocabFile, MergeFile, Model string
	ExtraIDs                          int
}

// VocabFunc reads a tokenizer's vocabulary size (before padding) from its
// files, and says where it came from; 0 and no error when it cannot tell.
type VocabFunc func(TokenizerArgs) (vocab int, source string, err error)

// MegatronTokenizer returns the tokenizer flags of an argument list.
func MegatronTokenizer(args []string) TokenizerArgs {
	a := parseMegatronArgs(args)
	t := TokenizerArgs{Type: a["--tokenizer-type"], VocabFile: a["--vocab-file"], MergeFile: a["--merge-file"],
		Model: a["--tokenizer-model"]}
	t.ExtraIDs, _ = strconv.Atoi(a["--vocab-extra-ids"])
	if t.Type == "" && t.VocabFile != "" && t.MergeFile != "" {
		t.Type = "GPT2BPETokenizer"
	}
	return t
}

// ModelFromMegatronArgsVocab is ModelFromMegatronArgs that reads the
// vocabulary as Megatron does: from the tokenizer (vocab reads its files;
// nil: GPT2BPETokenizer's 50257 only), --vocab-size + 1 for NullTokenizer,
// else --vocab-size. Only when nothing tells is a missing --vocab-size an
// error.
func ModelFromMegatronArgsVocab(args []string, vocab VocabFunc) (m Model, fixed Constraints, found bool, err error) {
	a := parseMegatronArgs(args)
	for _, f := range megatronShapeFlags {
		found = found || a.has(f)
	}
	if !found {
		return Model{}, Constraints{}, false, nil
	}
	var errs fieldErrors
	m = modelFromArgs(a, &errs, vocabReader(args, vocab))
	fixed = constraintsFromArgs(a, m.NumLayers, &errs)
	if err := errs.err("megatron arguments"); err != nil {
		return Model{}, Constraints{}, true, err
	}
	if err := m.Validate(); err != nil {
		return Model{}, Constraints{}, true, fmt.Errorf("megatron arguments: %w", err)
	}
	return m, fixed, true, nil
}

func modelFromArgs(a megatronArgs, errs *fieldErrors, vocab func(megatronArgs, *fieldErrors) int) Model {
	var missing []string
	for _, f := range megatronShapeFlags {
		if !a.has(f) {
			missing = append(missing, f)
		}
	}
	m := Model{
		Name:                  "megatron-args",
		NumLayers:             a.int("--num-layers", errs),
		Hidden:                a.int("--hidden-size", errs),
		Heads:                 a.int("--num-attention-heads", errs),
		FFNHidden:             a.int("--ffn-hidden-size", errs),
		SwiGLU:                a.has("--swiglu"),
		SeqLength:             a.int("--seq-length", errs),
		MaxPositionEmbeddings: a.int("--max-position-embeddings", errs),
		UntieEmbeddings:       a.has("--untie-embeddings-and-output-weights"),
		Vocab:                 vocab(a, errs),
		VocabDivisibleBy:      a.int("--make-vocab-size-divisible-by", errs),
		MaterializedAttention: materializedAttention(a),
		PositionEmbedding:     positionEmbedding(a),
	}
	switch {
	case a.has("--group-query-attention"):
		m.QueryGroups = a.int("--num-query-groups", errs)
	case a.has("--num-key-value-heads"):
		// Megatron-DeepSpeed's GQA flag (no switch; default: heads).
		m.QueryGroups = a.int("--num-key-value-heads", errs)
	}
	if m.MaxPositionEmbeddings == 0 {
		m.MaxPositionEmbeddings = m.SeqLength
	}
	if m.Vocab == 0 && !a.has("--vocab-size") {
		missing = append(missing, "--vocab-size (the tokenizer's files are not readable here; or pass --model)")
	}
	if len(missing) > 0 {
		errs.add("missing", "%s (needed to size the model)", strings.Join(missing, ", "))
	}
	return m
}

// vocabReader returns how modelFromArgs reads the vocabulary.
func vocabReader(args []string, vocab VocabFunc) func(megatronArgs, *fieldErrors) int {
	return func(a megatronArgs, errs *fieldErrors) int {
		t := MegatronTokenizer(args)
		switch t.Type {
		case "NullTokenizer":
			// _NullTokenizer adds an end-of-document id after the vocabulary.
			if n := a.int("--vocab-size", errs); n > 0 {
				return n + 1
			}
			return 0
		case "TikTokenizer":
			if a.has("--vocab-size") {
				return a.int("--vocab-size", errs)
			}
			return 1 << 17 // CustomTikTokenizer's fallback
		}
		if vocab != nil && t.Type != "" {
			n, _, err := vocab(t)
			if err != nil {
				errs.add("--tokenizer-type "+t.Type, "%v", err)
				return 0
			}
			if n > 0 {
				return n
			}
		}
		if a.has("--vocab-size") {
			return a.int("--vocab-size", errs)
		}
		if t.Type == "GPT2BPETokenizer" {
			return 50257
		}
		return 0
	}
}

// positionEmbedding is Megatron's --position-embedding-type, or rope for
// Megatron-DeepSpeed's --use-rotary-position-embeddings; "" = Megatron's
// default, learned_absolute.
func positionEmbedding(a megatronArgs) string {
	if v := a["--position-embedding-type"]; v != "" {
		return v
	}
	if a.has("--use-rotary-position-embeddings") {
		return "rope"
	}
	return ""
}

func constraintsFromArgs(a megatronArgs, layers int, errs *fieldErrors) Constraints {
	c := Constraints{
		TP:           a.int("--tensor-model-parallel-size", errs),
		PP:           a.int("--pipeline-model-parallel-size", errs),
		CP:           a.int("--context-parallel-size", errs),
		MicroBatch:   a.int("--micro-batch-size", errs),
		ZeroStage:    -1,
		ForceOffload: a.has("--optimizer-cpu-offload"),
	}
	c.VPP = vppFromArgs(a, layers, c.PP, errs)
	// The user's flags decide sequence parallelism and precision: a run
	// without --sequence-parallel gets none.
	c.SequenceParallel = boolPtr(a.has("--sequence-parallel"))
	c.Precision = precisionFromArgs(a)
	if a.has("--use-distributed-optimizer") {
		c.DistributedOptimizer = boolPtr(true)
	}
	if g, ok := a["--recompute-granularity"]; ok {
		switch Recompute(g) {
		case RecomputeFull, RecomputeSelective:
			c.Recompute = Recompute(g)
		default:
			errs.add("--recompute-granularity", "want full or selective, got %q", g)
		}
	}
	// Megatron turns --recompute-activations into selective recompute.
	if a.has("--recompute-activations") {
		if c.Recompute == RecomputeFull {
			errs.add("--recompute-activations", "means selective recompute, but --recompute-granularity full was given; drop one")
		}
		c.Recompute = RecomputeSelective
	}
	if v, ok := a["--zero-stage"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 3 {
			errs.add("--zero-stage", "want 0..3, got %q", v)
		} else {
			c.ZeroStage = n
		}
	}
	return c
}

// vppFromArgs converts either virtual-pipeline flag into stages per rank.
func vppFromArgs(a megatronArgs, layers, pp int, errs *fieldErrors) int {
	const perStage, perRank = "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"
	if a.has(perStage) && a.has(perRank) {
		errs.add(perStage, "give at most one of %s and %s", perStage, perRank)
		return 0
	}
	if a.has(perRank) {
		return a.int(perRank, errs)
	}
	n := a.int(perStage, errs)
	if n == 0 {
		return 0
	}
	if pp < 2 {
		errs.add(perStage, "needs --pipeline-model-parallel-size > 1")
		return 0
	}
	if layers == 0 || layers%(pp*n) != 0 {
		errs.add(perStage, "%d layers do not split into %d stages of %d layers", layers, pp, n)
		return 0
	}
	return layers / (pp * n)
}

func boolPtr(b bool) *bool { return &b }

// MegatronBatchArgs returns --micro-batch-size and --global-batch-size from
// a Megatron-LM argument list; each is 0 when absent. A value that is not
// a positive integer is an error naming the flag.
func MegatronBatchArgs(args []string) (micro, global int, err error) {
	a := parseMegatronArgs(args)
	var errs fieldErrors
	micro = a.int("--micro-batch-size", &errs)
	global = a.int("--global-batch-size", &errs)
	if err := errs.err("megatron arguments"); err != nil {
		return 0, 0, err
	}
	return micro, global, nil
}

// materializedAttention reports whether the run stores attention scores:
// only Megatron's unfused backends do; "flash", "fused" and "auto" (the
// default, Transformer Engine's fused kernels) do not.
func materializedAttention(a megatronArgs) bool {
	switch a["--attention-backend"] {
	case "unfused", "local":
		return true
	}
	return false
}

// unmodelledFeatures are Megatron-LM / Megatron-DeepSpeed features the
// planner does not model: the flags that turn each on (a prefix ends in
// "-") and what the prediction then leaves out.
var unmodelledFeatures = []struct {
	flags []string
	what  string
}{
	{[]string{"--num-experts", "--moe-", "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--ep-world-size"},
		"mixture of experts: planned as the dense model, so expert weights and their optimizer states, the router and the expert all-to-all are not in the memory or time estimate"},
	// --fp8-format is modelled (planner/choices.go); FP4 is not.
	{[]string{"--fp4-format", "--fp4-recipe"}, "FP4 training: the estimate prices its GEMMs and weights as the planned precision's"},
	{[]string{"--mtp-num-layers"}, "multi-token prediction: its extra layers and losses are not in the estimate"},
	{[]string{"--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank"}, "multi-latent attention: attention is estimated as standard (GQA) attention"},
	{[]string{"--kv-channels"}, "a head size other than hidden/heads: attention is estimated with hidden/heads channels per head"},
	{[]string{"--hybrid-override-pattern", "--is-hybrid-model"}, "hybrid (Mamba) layers: every layer is estimated as a transformer layer"},
	{[]string{"--rampup-batch-size"}, "batch-size ramp-up: the plan is for the full global batch only"},
}

// UnmodelledMegatronFeatures returns one line per feature in the
// arguments the planner does not model: the flag and what the prediction
// leaves out. The flags pass through to the job unchanged.
func UnmodelledMegatronFeatures(args []string) []string {
	var out []string
	for _, f := range unmodelledFeatures {
		if flag := firstFlag(args, f.flags); flag != "" {
			out = append(out, fmt.Sprintf("%s is passed through, but the planner does not model %s", flag, f.what))
		}
	}
	return out
}

// firstFlag returns the first argument naming one of the flags (or a
// prefix ending in "-"), without any =value.
func firstFlag(args, flags []string) string {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		for _, f := range flags {
			if name == f || (strings.HasSuffix(f, "-") && strings.HasPrefix(name, f)) {
				return name
			}
		}
	}
	return ""
}
