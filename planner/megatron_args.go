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
	a := parseMegatronArgs(args)
	for _, f := range megatronShapeFlags {
		found = found || a.has(f)
	}
	if !found {
		return Model{}, Constraints{}, false, nil
	}
	var errs fieldErrors
	m = modelFromArgs(a, &errs)
	fixed = constraintsFromArgs(a, m.NumLayers, &errs)
	if err := errs.err("megatron arguments"); err != nil {
		return Model{}, Constraints{}, true, err
	}
	if err := m.Validate(); err != nil {
		return Model{}, Constraints{}, true, fmt.Errorf("megatron arguments: %w", err)
	}
	return m, fixed, true, nil
}

func modelFromArgs(a megatronArgs, errs *fieldErrors) Model {
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
		Vocab:                 vocabFromArgs(a, errs),
		MaterializedAttention: materializedAttention(a),
	}
	if a.has("--group-query-attention") {
		m.QueryGroups = a.int("--num-query-groups", errs)
	}
	if m.MaxPositionEmbeddings == 0 {
		m.MaxPositionEmbeddings = m.SeqLength
	}
	if m.Vocab == 0 && !a.has("--vocab-size") {
		missing = append(missing, "--vocab-size")
	}
	if len(missing) > 0 {
		errs.add("missing", "%s (needed to size the model)", strings.Join(missing, ", "))
	}
	return m
}

func vocabFromArgs(a megatronArgs, errs *fieldErrors) int {
	if a.has("--vocab-size") {
		return a.int("--vocab-size", errs)
	}
	if a["--tokenizer-type"] == "GPT2BPETokenizer" {
		return 50257
	}
	return 0
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
