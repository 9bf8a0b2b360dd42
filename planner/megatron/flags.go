package megatron

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Origin says which program defines a flag: Megatron-LM itself, or a fork
// whose scripts pipette-launch also reads and writes.
type Origin string

const (
	MegatronLM        Origin = "Megatron-LM"
	MegatronDeepSpeed Origin = "Megatron-DeepSpeed"
	Holmes            Origin = "Holmes"
	Torch             Origin = "torch.distributed.launch"
)

// Flag is one flag the parser knows: whether it takes a value (argparse
// store / store_true) and who defines it.
type Flag struct {
	Value  bool
	Origin Origin
}

// Flags are every flag pipette-launch reads from or writes into a Megatron
// argument list. A switch never takes the next token; a value flag takes
// it (or its =value). A Megatron-LM flag must be one core_v0.19.0's
// parse_args defines (checked against its list in testdata).
var Flags = map[string]Flag{}

func init() {
	add := func(value bool, o Origin, names ...string) {
		for _, n := range names {
			if _, dup := Flags[n]; dup {
				panic("megatron: flag listed twice: " + n)
			}
			Flags[n] = Flag{Value: value, Origin: o}
		}
	}
	// Model shape, tokenizer and numerics.
	add(true, MegatronLM, "--num-layers", "--hidden-size", "--num-attention-heads", "--ffn-hidden-size",
		"--num-query-groups", "--kv-channels", "--seq-length", "--max-position-embeddings",
		"--make-vocab-size-divisible-by", "--vocab-size", "--position-embedding-type", "--attention-backend",
		"--tokenizer-type", "--vocab-file", "--merge-file", "--tokenizer-model", "--vocab-extra-ids",
		"--fp8-format", "--distributed-backend", "--attention-dropout", "--hidden-dropout")
	add(false, MegatronLM, "--swiglu", "--group-query-attention", "--untie-embeddings-and-output-weights",
		"--disable-bias-linear", "--qk-layernorm", "--bf16", "--fp16",
		"--use-rotary-position-embeddings") // Megatron-LM's, and Megatron-DeepSpeed's way to ask for RoPE
	// Mixture of experts.
	add(true, MegatronLM, "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
		"--moe-shared-expert-intermediate-size", "--moe-layer-freq", "--moe-expert-capacity-factor",
		"--moe-token-dispatcher-type", "--expert-model-parallel-size", "--expert-tensor-parallel-size")
	add(false, MegatronLM, "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-pad-expert-input-to-capacity",
		"--moe-shared-expert-overlap", "--moe-router-pre-softmax", "--overlap-moe-expert-parallel-comm")
	// Parallelism, layer split, batch.
	add(true, MegatronLM, "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
		"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
		"--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
		"--micro-batch-size", "--global-batch-size", "--nccl-communicator-config-path")
	add(false, MegatronLM, "--sequence-parallel", "--no-overlap-p2p-communication", "--use-tp-pp-dp-mapping",
		EmbeddingInSplitFlag, LossInSplitFlag)
	// Priced (parallel.Config.TPCommOverlap, TPOverlapCfg), passed through
	// as the user's.
	add(false, MegatronLM, TPCommOverlapFlag)
	add(true, MegatronLM, TPCommOverlapCfgFlag)
	// Recomputation, optimizer, offload, overlap.
	add(true, MegatronLM, "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
		"--optimizer-offload-fraction")
	// --checkpoint-activations: Megatron-DeepSpeed's full recompute; Megatron-LM
	// core_v0.19.0 still parses it, then exits ("no longer valid").
	add(false, MegatronLM, "--checkpoint-activations")
	add(false, MegatronLM, "--recompute-activations", "--use-distributed-optimizer", "--overlap-grad-reduce",
		"--overlap-param-gather", "--optimizer-cpu-offload", "--use-precision-aware-optimizer",
		"--overlap-cpu-optimizer-d2h-h2d")
	// The precision-aware optimizer's dtypes (priced: parallel.PrecisionAwareOptimizer).
	add(true, MegatronLM, slices.Collect(maps.Keys(precisionAwareDtypes))...)
	// Megatron-DeepSpeed's own.
	add(true, MegatronDeepSpeed, "--zero-stage", "--deepspeed_config", "--num-key-value-heads")
	add(false, MegatronDeepSpeed, "--deepspeed", "--no-pipeline-parallel", "--cpu-optimizer",
		"--no-query-key-layer-scaling")
	add(true, MegatronDeepSpeed, "--checkpoint-num-layers")
	// Megatron-DeepSpeed's mixture of experts (DeepSpeed's MoE layer; its
	// --num-experts takes a list, Megatron-LM's one integer).
	add(true, MegatronDeepSpeed, dsMoEValueFlags...)
	add(false, MegatronDeepSpeed, dsMoESwitches...)
	// Holmes' heterogeneous-NIC switch.
	add(false, Holmes, "--use-hetnet")
	// What torch.distributed.launch passes each rank (DeepSpeed's scripts).
	add(true, Torch, "--local_rank")
}

// Occurrence is one flag in an argument list: its name, its value ("" for
// a switch) and the tokens it spans, args[Start:End].
type Occurrence struct {
	Name, Value string
	Start, End  int
}

// Args is an argument list parsed the way Megatron's argparse reads it:
// `--flag value`, `--flag=value` and switches, the last occurrence of a
// flag winning. Tokens are kept as given; a flag Flags does not know takes
// the next token as its value unless that token is itself a flag.
type Args struct {
	argv []string
	occ  []Occurrence
}

// Parse reads an argument list. It never fails: values are checked where
// they are read.
func Parse(argv []string) Args {
	a := Args{argv: argv}
	for i := 0; i < len(argv); i++ {
		name, val, hasEq := strings.Cut(argv[i], "=")
		if !strings.HasPrefix(name, "--") || name == "--" {
			continue
		}
		o := Occurrence{Name: name, Value: val, Start: i, End: i + 1}
		if !hasEq && (Flags[name].Value || !isKnown(name)) && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "--") {
			o.Value, o.End = argv[i+1], i+2
			i++
		}
		a.occ = append(a.occ, o)
	}
	return a
}

func isKnown(name string) bool { _, ok := Flags[name]; return ok }

// Occurrences are the flags in order.
func (a Args) Occurrences() []Occurrence { return a.occ }

// Has reports whether the flag occurs.
func (a Args) Has(name string) bool {
	_, ok := a.Last(name)
	return ok
}

// Last returns the value of the flag's last occurrence, as argparse keeps it.
func (a Args) Last(name string) (string, bool) {
	v, ok := "", false
	for _, o := range a.occ {
		if o.Name == name {
			v, ok = o.Value, true
		}
	}
	return v, ok
}

// Value is Last without the flag's presence ("" when absent).
func (a Args) Value(name string) string {
	v, _ := a.Last(name)
	return v
}

// Int returns an integer flag's value, def when absent.
func (a Args) Int(name string, def int) (int, error) {
	v, ok := a.Last(name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not an integer", name, v)
	}
	return n, nil
}

// Without returns the argument list with every occurrence of the named
// flags (and their values) removed.
func (a Args) Without(drop map[string]bool) []string {
	skip := make([]bool, len(a.argv))
	for _, o := range a.occ {
		if drop[o.Name] {
			for i := o.Start; i < o.End; i++ {
				skip[i] = true
			}
		}
	}
	var out []string
	for i, t := range a.argv {
		if !skip[i] {
			out = append(out, t)
		}
	}
	return out
}

// ShapeFlags are the flags whose presence means "this argument list
// describes a model" (ModelFromArgs needs all of them then).
var ShapeFlags = []string{"--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length"}

// identifyingFlags mark an argument list as Megatron-LM's: the model shape
// or its parallelism and batch flags.
var identifyingFlags = append(append([]string(nil), ShapeFlags...),
	"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size", "--global-batch-size")

// LooksLike reports whether a script and its arguments are a Megatron-LM
// (or Megatron-DeepSpeed) training: a pretrain_*.py entry point or
// Megatron's model-shape and parallelism flags.
func LooksLike(script string, args []string) bool {
	base := script[strings.LastIndex(script, "/")+1:]
	if strings.HasPrefix(base, "pretrain_") && strings.HasSuffix(base, ".py") {
		return true
	}
	a := Parse(args)
	for _, f := range identifyingFlags {
		if a.Has(f) {
			return true
		}
	}
	return false
}

// UnpricedFlags are the flags of argv, once each in order, that Flags does
// not know: the planner neither reads nor writes them (kernel fusions,
// communication overlaps it has no term for, logging, data), so a
// prediction assumes they do not change the step time.
func UnpricedFlags(argv []string) []string {
	var out []string
	for _, o := range Parse(argv).Occurrences() {
		if !isKnown(o.Name) && !slices.Contains(out, o.Name) {
			out = append(out, o.Name)
		}
	}
	return out
}

// TPCommOverlapCfgFlag names the userbuffers configuration (a YAML file of
// Transformer Engine's ub_cfgs) Megatron-LM's --tp-comm-overlap runs with;
// priced as parallel.Config.TPOverlapCfg (read by planner/megatron/tpoverlap).
const TPCommOverlapCfgFlag = "--tp-comm-overlap-cfg"
