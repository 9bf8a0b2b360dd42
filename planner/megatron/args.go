package megatron

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// positive reads a positive integer flag; 0 when absent.
func (a Args) positive(flag string, errs *yamlcheck.Problems) int {
	v, ok := a.Last(flag)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		errs.Add(flag, "want a positive integer, got %q", v)
		return 0
	}
	return n
}

// ModelFromArgs reads the model shape from a Megatron-LM argument
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
// Batch sizes come from BatchArgs.
func ModelFromArgs(args []string) (m model.Model, fixed parallel.Constraints, found bool, err error) {
	return ModelFromArgsVocab(args, nil)
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

// Tokenizer returns the tokenizer flags of an argument list.
func Tokenizer(args []string) TokenizerArgs {
	a := Parse(args)
	t := TokenizerArgs{Type: a.Value("--tokenizer-type"), VocabFile: a.Value("--vocab-file"), MergeFile: a.Value("--merge-file"),
		Model: a.Value("--tokenizer-model")}
	t.ExtraIDs, _ = strconv.Atoi(a.Value("--vocab-extra-ids"))
	if t.Type == "" && t.VocabFile != "" && t.MergeFile != "" {
		t.Type = "GPT2BPETokenizer"
	}
	return t
}

// ModelFromArgsVocab is ModelFromArgs that reads the
// vocabulary as Megatron does: from the tokenizer (vocab reads its files;
// nil: GPT2BPETokenizer's 50257 only), --vocab-size + 1 for NullTokenizer,
// else --vocab-size. Only when nothing tells is a missing --vocab-size an
// error.
func ModelFromArgsVocab(args []string, vocab VocabFunc) (m model.Model, fixed parallel.Constraints, found bool, err error) {
	a := Parse(args)
	for _, f := range ShapeFlags {
		found = found || a.Has(f)
	}
	if !found {
		return model.Model{}, parallel.Constraints{}, false, nil
	}
	var errs yamlcheck.Problems
	m = modelFromArgs(a, &errs, vocabReader(args, vocab))
	fixed = constraintsFromArgs(a, m.NumLayers, &errs)
	if err := errs.Err("megatron arguments"); err != nil {
		if !slices.ContainsFunc(errs, func(p yamlcheck.Problem) bool { return p.Path != "missing" }) {
			err = &UnsizedError{err}
		}
		return model.Model{}, parallel.Constraints{}, true, err
	}
	if err := m.Validate(); err != nil {
		return model.Model{}, parallel.Constraints{}, true, fmt.Errorf("megatron arguments: %w", err)
	}
	return m, fixed, true, nil
}

// UnsizedError is ModelFromArgsVocab's error when the flags only lack what
// sizing the model needs (BERT's vocab file not here, T5's encoder and
// decoder flags), nothing they give being wrong: such a job can still run
// unplanned.
type UnsizedError struct{ Err error }

func (e *UnsizedError) Error() string { return e.Err.Error() }
func (e *UnsizedError) Unwrap() error { return e.Err }

// ConstraintsFromArgs is what the script's Megatron flags fix (parallel
// sizes, micro-batch, recompute, precision...) without sizing the model: a
// job that is not planned, or whose model cannot be sized here (BERT, T5,
// hybrid Mamba, a tokenizer not readable here), still runs with them.
func ConstraintsFromArgs(args []string) (parallel.Constraints, error) {
	a := Parse(args)
	var errs yamlcheck.Problems
	layers := 0
	if a.Has("--num-layers") {
		layers = a.positive("--num-layers", &errs)
	}
	c := constraintsFromArgs(a, layers, &errs)
	return c, errs.Err("megatron arguments")
}

func modelFromArgs(a Args, errs *yamlcheck.Problems, vocab func(Args, *yamlcheck.Problems) int) model.Model {
	var missing []string
	for _, f := range ShapeFlags {
		if !a.Has(f) {
			missing = append(missing, f)
		}
	}
	m := model.Model{
		Name:                  "megatron-args",
		NumLayers:             a.positive("--num-layers", errs),
		Hidden:                a.positive("--hidden-size", errs),
		Heads:                 a.positive("--num-attention-heads", errs),
		FFNHidden:             a.positive("--ffn-hidden-size", errs),
		SwiGLU:                a.Has("--swiglu"),
		SeqLength:             a.positive("--seq-length", errs),
		MaxPositionEmbeddings: a.positive("--max-position-embeddings", errs),
		UntieEmbeddings:       a.Has("--untie-embeddings-and-output-weights"),
		Vocab:                 vocab(a, errs),
		VocabDivisibleBy:      a.positive("--make-vocab-size-divisible-by", errs),
		MaterializedAttention: materializedAttention(a),
		PositionEmbedding:     positionEmbedding(a),
	}
	switch {
	case a.Has("--group-query-attention"):
		m.QueryGroups = a.positive("--num-query-groups", errs)
	case a.Has("--num-key-value-heads"):
		// Megatron-DeepSpeed's GQA flag (no switch; default: heads).
		m.QueryGroups = a.positive("--num-key-value-heads", errs)
	}
	if m.MaxPositionEmbeddings == 0 {
		m.MaxPositionEmbeddings = m.SeqLength
	}
	m.KVChannels = a.positive("--kv-channels", errs)
	m.AttentionDropout = a.probability("--attention-dropout", errs)
	m.HiddenDropout = a.probability("--hidden-dropout", errs)
	if isDeepSpeedMoE(a) {
		var residual bool
		if m.MoE, residual = moeFromDeepSpeedArgs(a, m.NumLayers, errs); residual {
			m.SharedFFN = m.FFN()
		}
	} else {
		m.MoE = moeFromArgs(a, m.NumLayers, errs)
	}
	if m.Vocab == 0 && !a.Has("--vocab-size") {
		missing = append(missing, "--vocab-size (the tokenizer's files are not readable here; or pass --model)")
	}
	if len(missing) > 0 {
		errs.Add("missing", "%s (needed to size the model)", strings.Join(missing, ", "))
	}
	return m
}

// probability reads a dropout flag: nil when absent (Megatron's default),
// else its value, which must be in [0, 1).
func (a Args) probability(flag string, errs *yamlcheck.Problems) *float64 {
	v, ok := a.Last(flag)
	if !ok {
		return nil
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil || p < 0 || p >= 1 {
		errs.Add(flag, "want a probability in [0, 1), got %q", v)
		return nil
	}
	return &p
}

// moeFromArgs reads Megatron-Core's MoE flags: --num-experts,
// --moe-router-topk, --moe-ffn-hidden-size,
// --moe-shared-expert-intermediate-size, --moe-layer-freq (an integer or
// a Python list expression such as "([0]*1+[1]*26)") and
// --moe-expert-capacity-factor.
func moeFromArgs(a Args, layers int, errs *yamlcheck.Problems) model.MoE {
	e := model.MoE{
		NumExperts: a.positive("--num-experts", errs),
		TopK:       a.positive("--moe-router-topk", errs),
		FFNHidden:  a.positive("--moe-ffn-hidden-size", errs),
		SharedFFN:  a.positive("--moe-shared-expert-intermediate-size", errs),
	}
	if v, ok := a.Last("--moe-expert-capacity-factor"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			errs.Add("--moe-expert-capacity-factor", "want a non-negative number, got %q", v)
		}
		e.CapacityFactor = f
	}
	if v, ok := a.Last("--moe-layer-freq"); ok {
		freq, dense, err := ParseMoELayerFreq(v, layers)
		if err != nil {
			errs.Add("--moe-layer-freq", "%v", err)
		}
		e.LayerFreq, e.DenseFirst = freq, dense
	}
	if e.NumExperts == 0 {
		for _, f := range []string{"--moe-router-topk", "--moe-ffn-hidden-size", "--moe-shared-expert-intermediate-size", "--moe-layer-freq"} {
			if a.Has(f) {
				errs.Add(f, "given without --num-experts (the model would be dense); add --num-experts")
			}
		}
		return model.MoE{}
	}
	return e
}

// ParseMoELayerFreq reads --moe-layer-freq as Megatron does (an integer N:
// layer i is MoE when i % N == 0; or a list of 0/1 per layer written as a
// Python expression of lists, "+" and "*", e.g. "([0]*3+[1]*27)") and
// returns it as (frequency, leading dense layers). A list that is not of
// that form is an error saying so.
func ParseMoELayerFreq(v string, layers int) (freq, denseFirst int, err error) {
	s := strings.Trim(strings.TrimSpace(v), "'\"")
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 {
			return 0, 0, fmt.Errorf("want a positive integer or a list, got %q", v)
		}
		return n, 0, nil
	}
	pat, err := evalLayerList(s)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: %w", v, err)
	}
	if layers > 0 && len(pat) != layers {
		return 0, 0, fmt.Errorf("%q lists %d layers, the model has %d", v, len(pat), layers)
	}
	dense := 0
	for dense < len(pat) && pat[dense] == 0 {
		dense++
	}
	if dense == len(pat) {
		return 0, 0, fmt.Errorf("%q makes no layer MoE", v)
	}
	for f := 1; f <= len(pat); f++ {
		ok := true
		for i, x := range pat {
			if want := i >= dense && i%f == 0; want != (x == 1) {
				ok = false
				break
			}
		}
		if ok {
			return f, dense, nil
		}
	}
	return 0, 0, fmt.Errorf("%q: the planner models leading dense layers followed by every N-th layer MoE; this pattern is not of that form", v)
}

// evalLayerList evaluates sums of [a,b,...] or [..]*n terms, in optional
// parentheses, into a 0/1 list.
func evalLayerList(s string) ([]int, error) {
	s = strings.ReplaceAll(s, " ", "")
	for strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		s = s[1 : len(s)-1]
	}
	var out []int
	for _, term := range strings.Split(s, "+") {
		body, rep := term, 1
		if i := strings.LastIndex(term, "]*"); i >= 0 {
			n, err := strconv.Atoi(term[i+2:])
			if err != nil || n < 0 || n > 1<<16 {
				return nil, fmt.Errorf("bad repeat in %q", term)
			}
			body, rep = term[:i+1], n
		}
		if !strings.HasPrefix(body, "[") || !strings.HasSuffix(body, "]") {
			return nil, fmt.Errorf("want lists such as [0]*3+[1]*27, got %q", term)
		}
		var items []int
		for _, x := range strings.Split(body[1:len(body)-1], ",") {
			switch x {
			case "0", "1":
				items = append(items, int(x[0]-'0'))
			default:
				return nil, fmt.Errorf("want 0 or 1 per layer, got %q", x)
			}
		}
		for range rep {
			out = append(out, items...)
		}
		if len(out) > 1<<16 {
			return nil, fmt.Errorf("list too long")
		}
	}
	return out, nil
}

// vocabReader returns how modelFromArgs reads the vocabulary.
func vocabReader(args []string, vocab VocabFunc) func(Args, *yamlcheck.Problems) int {
	return func(a Args, errs *yamlcheck.Problems) int {
		t := Tokenizer(args)
		switch t.Type {
		case "NullTokenizer":
			// _NullTokenizer adds an end-of-document id after the vocabulary.
			if n := a.positive("--vocab-size", errs); n > 0 {
				return n + 1
			}
			return 0
		case "TikTokenizer":
			if a.Has("--vocab-size") {
				return a.positive("--vocab-size", errs)
			}
			return 1 << 17 // CustomTikTokenizer's fallback
		}
		if vocab != nil && t.Type != "" {
			n, _, err := vocab(t)
			if err != nil {
				errs.Add("--tokenizer-type "+t.Type, "%v", err)
				return 0
			}
			if n > 0 {
				return n
			}
		}
		if a.Has("--vocab-size") {
			return a.positive("--vocab-size", errs)
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
func positionEmbedding(a Args) string {
	if v := a.Value("--position-embedding-type"); v != "" {
		return v
	}
	if a.Has("--use-rotary-position-embeddings") {
		return "rope"
	}
	return ""
}

func constraintsFromArgs(a Args, layers int, errs *yamlcheck.Problems) parallel.Constraints {
	c := parallel.Constraints{
		TP:           a.positive("--tensor-model-parallel-size", errs),
		PP:           a.positive("--pipeline-model-parallel-size", errs),
		CP:           a.positive("--context-parallel-size", errs),
		MicroBatch:   a.positive("--micro-batch-size", errs),
		EP:           a.positive("--expert-model-parallel-size", errs),
		ETP:          a.positive("--expert-tensor-parallel-size", errs),
		ZeroStage:    -1,
		ForceOffload: a.Has("--optimizer-cpu-offload"),
	}
	if a.Has(UlyssesFlag) {
		// DeepSpeed-Ulysses: its ranks split each sequence outside DP, as
		// context parallelism's do (parallel.Config.Ulysses).
		if sp := a.positive(UlyssesFlag, errs); sp > 0 {
			if c.CP > 1 {
				errs.Add(UlyssesFlag, "DeepSpeed-Ulysses and --context-parallel-size %d both split the sequence, and Megatron-DeepSpeed refuses the two together: give one", c.CP)
			}
			c.CP, c.Ulysses = sp, true
		}
	}
	if isDeepSpeedMoE(a) {
		dsMoEConstraints(a, &c, errs)
	}
	c.VPP = vppFromArgs(a, layers, c.PP, errs)
	c.StageLayers = splitStagesFromArgs(a, layers, c.PP, c.VPP, errs)
	// The user's flags decide sequence parallelism and precision: a run
	// without --sequence-parallel gets none.
	c.SequenceParallel = boolPtr(a.Has("--sequence-parallel"))
	c.Precision = precisionFromArgs(a)
	c.LowPrecisionDP = parallel.LowPrecisionDP{FP8ParamGather: a.Has("--fp8-param-gather"), GradReduceBF16: a.Has("--grad-reduce-in-bf16"),
		PrecisionAware: precisionAwareFromArgs(a, errs)}
	c.TPCommOverlap = a.Has(TPCommOverlapFlag)
	if c.TPCommOverlap && !a.Has("--sequence-parallel") {
		errs.Add(TPCommOverlapFlag, "needs --sequence-parallel: Megatron-LM asserts TP communication/GEMM overlap only runs with sequence parallelism")
	}
	if a.Has("--use-distributed-optimizer") {
		c.DistributedOptimizer = boolPtr(true)
	}
	if g, ok := a.Last("--recompute-granularity"); ok {
		switch parallel.Recompute(g) {
		case parallel.RecomputeFull, parallel.RecomputeSelective:
			c.Recompute = parallel.Recompute(g)
		default:
			errs.Add("--recompute-granularity", "want full or selective, got %q", g)
		}
	}
	// Megatron turns --recompute-activations into selective recompute.
	if a.Has("--recompute-activations") {
		if c.Recompute == parallel.RecomputeFull {
			errs.Add("--recompute-activations", "means selective recompute, but --recompute-granularity full was given; drop one")
		}
		c.Recompute = parallel.RecomputeSelective
	}
	// Megatron-DeepSpeed's --checkpoint-activations recomputes every layer
	// in full (its GPTModelPipe checkpoints every --checkpoint-num-layers
	// layers, default 1; the Megatron-LM forks that still read it turn it
	// into --recompute-granularity full --recompute-method uniform;
	// Megatron-LM core_v0.19.0 exits on it, "no longer valid").
	if a.Has("--checkpoint-activations") {
		if c.Recompute == parallel.RecomputeSelective {
			errs.Add("--checkpoint-activations", "means full recompute, but selective recompute was asked too (--recompute-activations or --recompute-granularity selective); drop one")
		}
		c.Recompute = parallel.RecomputeFull
	}
	if v, ok := a.Last("--zero-stage"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 3 {
			errs.Add("--zero-stage", "want 0..3, got %q", v)
		} else {
			c.ZeroStage = n
		}
	}
	return c
}

// splitStagesFromArgs is the layer split --decoder-first-pipeline-num-layers,
// --decoder-last-pipeline-num-layers and the embedding and loss accounting
// flags ask for, as StageLayers (nil without them), checked as
// Megatron-Core checks it (Split.StageLayers).
func splitStagesFromArgs(a Args, layers, pp, vpp int, errs *yamlcheck.Problems) []int {
	s := Split{PP: pp, VPP: max(vpp, 1), Embedding: a.Has(EmbeddingInSplitFlag), Loss: a.Has(LossInSplitFlag)}
	flag := "" // the flag a problem is reported against: the last given
	for _, f := range []string{LossInSplitFlag, EmbeddingInSplitFlag, FirstStageLayersFlag, LastStageLayersFlag} {
		if a.Has(f) {
			flag = f
		}
	}
	for i, f := range []string{FirstStageLayersFlag, LastStageLayersFlag} {
		if dst := []*int{&s.First, &s.Last}[i]; a.Has(f) {
			if *dst = a.positive(f, errs); *dst <= 0 {
				return nil
			}
		}
	}
	switch {
	case flag == "":
		return nil
	case (s.First > 0 || s.Last > 0) && pp < 2:
		errs.Add(flag, "an uneven first/last stage needs --pipeline-model-parallel-size > 1")
		return nil
	}
	if layers <= 0 {
		errs.Add(flag, "the layer split needs --num-layers")
		return nil
	}
	stages, err := s.StageLayers(layers)
	if err != nil {
		errs.Add(flag, "%v", err)
		return nil
	}
	return stages
}

// vppFromArgs converts either virtual-pipeline flag into stages per rank.
func vppFromArgs(a Args, layers, pp int, errs *yamlcheck.Problems) int {
	const perStage, perRank = "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"
	if a.Has(perStage) && a.Has(perRank) {
		errs.Add(perStage, "give at most one of %s and %s", perStage, perRank)
		return 0
	}
	if a.Has(perRank) {
		return a.positive(perRank, errs)
	}
	n := a.positive(perStage, errs)
	if n == 0 {
		return 0
	}
	if pp < 2 {
		errs.Add(perStage, "needs --pipeline-model-parallel-size > 1")
		return 0
	}
	// validate_args counts the accounted embedding and loss as layers.
	total := Split{Embedding: a.Has(EmbeddingInSplitFlag), Loss: a.Has(LossInSplitFlag)}.accountedLayers(layers)
	if layers == 0 || total%(pp*n) != 0 {
		errs.Add(perStage, "%d layers do not split into %d stages of %d layers", total, pp, n)
		return 0
	}
	return total / (pp * n)
}

func boolPtr(b bool) *bool { return &b }

// UlyssesFlag is Megatron-DeepSpeed's DeepSpeed-Ulysses sequence-parallel
// size.
const UlyssesFlag = "--ds-sequence-parallel-size"

// TPCommOverlapFlag is Megatron-LM's TP communication/GEMM overlap
// (Transformer Engine userbuffers), priced as parallel.Config.TPCommOverlap.
const TPCommOverlapFlag = "--tp-comm-overlap"

// BatchArgs returns --micro-batch-size and --global-batch-size from
// a Megatron-LM argument list; each is 0 when absent. A value that is not
// a positive integer is an error naming the flag.
func BatchArgs(args []string) (micro, global int, err error) {
	a := Parse(args)
	var errs yamlcheck.Problems
	micro = a.positive("--micro-batch-size", &errs)
	global = a.positive("--global-batch-size", &errs)
	for _, f := range []struct {
		flag string
		v    int
	}{{"--micro-batch-size", micro}, {"--global-batch-size", global}} {
		if f.v > limits.MaxGlobalBatch {
			errs.Add(f.flag, "must be 1..%d, got %d", limits.MaxGlobalBatch, f.v)
		}
	}
	if err := errs.Err("megatron arguments"); err != nil {
		return 0, 0, err
	}
	return micro, global, nil
}

// materializedAttention reports whether the run stores attention scores:
// only Megatron's unfused backends do; "flash", "fused" and "auto" (the
// default, Transformer Engine's fused kernels) do not.
func materializedAttention(a Args) bool {
	switch a.Value("--attention-backend") {
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
	// Mixture of experts is modelled (planner/memory and planner/search, moe.go) for Megatron-Core's
	// alltoall dispatcher; these variants are not.
	{[]string{"--moe-enable-deepep", "--moe-flex-dispatcher-backend"}, "DeepEP / flex dispatch: the expert all-to-all is priced as the alltoall dispatcher's"},
	{[]string{"--moe-router-num-groups", "--moe-router-group-topk"}, "device-limited (group) routing: the all-to-all is priced as if a token's experts could sit on any EP rank"},
	// Megatron-DeepSpeed's MoE (dsmoe.go) is modelled; its Tutel kernels are not.
	{[]string{"--use-tutel"}, "Tutel's MoE kernels: the dispatch is priced as DeepSpeed's own"},
	// --fp8-format is modelled (Precision, precision.go); FP4 is not.
	{[]string{"--fp4-format", "--fp4-recipe"}, "FP4 training: the estimate prices its GEMMs and weights as the planned precision's"},
	{[]string{"--mtp-num-layers"}, "multi-token prediction: its extra layers and losses are not in the estimate"},
	{[]string{"--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank"}, "multi-latent attention: attention is estimated as standard (GQA) attention"},
	{[]string{"--hybrid-override-pattern", "--is-hybrid-model"}, "hybrid (Mamba) layers: every layer is estimated as a transformer layer"},
	{[]string{"--rampup-batch-size"}, "batch-size ramp-up: the plan is for the full global batch only"},
}

// UnmodelledFeatures returns one line per feature in the
// arguments the planner does not model: the flag and what the prediction
// leaves out. The flags pass through to the job unchanged.
func UnmodelledFeatures(args []string) []string {
	var out []string
	for _, f := range unmodelledFeatures {
		if flag := firstFlag(args, f.flags); flag != "" {
			out = append(out, fmt.Sprintf("%s is passed through, but the planner does not model %s", flag, f.what))
		}
	}
	if n := dsPyramidNote(args); n != "" {
		out = append(out, n)
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

// precisionAwareDtypes are --use-precision-aware-optimizer's dtype flags
// with the choices Megatron-LM core_v0.19.0's argparse gives each (fp32
// first: the default); dtypeBytes their element sizes.
var (
	precisionAwareDtypes = map[string][]string{"--main-grads-dtype": {"fp32", "bf16"}, "--main-params-dtype": {"fp32", "fp16"},
		"--exp-avg-dtype": {"fp32", "fp16", "bf16", "fp8"}, "--exp-avg-sq-dtype": {"fp32", "fp16", "bf16", "fp8"}}
	dtypeBytes = map[string]float64{"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}
)

// precisionAwareFromArgs reads --use-precision-aware-optimizer and its
// dtypes (nil without the switch: Megatron ignores the dtypes then). A
// value argparse would refuse is refused here, naming the choices.
func precisionAwareFromArgs(a Args, errs *yamlcheck.Problems) *parallel.PrecisionAwareOptimizer {
	v := map[string]string{}
	for _, f := range slices.Sorted(maps.Keys(precisionAwareDtypes)) {
		choices := precisionAwareDtypes[f]
		v[f] = choices[0]
		if got, ok := a.Last(f); ok && !slices.Contains(choices, got) {
			errs.Add(f, "want one of %s, got %q", strings.Join(choices, ", "), got)
		} else if ok {
			v[f] = got
		}
	}
	if !a.Has("--use-precision-aware-optimizer") {
		return nil
	}
	return &parallel.PrecisionAwareOptimizer{MainParamsFP16: v["--main-params-dtype"] == "fp16", MainGradsBF16: v["--main-grads-dtype"] == "bf16",
		ExpAvgBytes: dtypeBytes[v["--exp-avg-dtype"]], ExpAvgSqBytes: dtypeBytes[v["--exp-avg-sq-dtype"]]}
}
