package megatron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// megatronSettings is what Megatron-LM's argument validation reads, parsed
// back from a rendered argument list.
type megatronSettings struct {
	// dsPipe: a Megatron-DeepSpeed job, whose pipeline stages DeepSpeed's
	// PipelineModule splits (CheckDeepSpeedArgs).
	dsPipe                           bool
	tp, pp, cp, ep, etp, experts     int
	ulysses                          int // --ds-sequence-parallel-size
	dsMoE, dsExpertTP                bool
	dsEP, dsExperts                  int // --moe-expert-parallel-size, the largest --num-experts
	sp                               bool
	numLayers, hidden, heads, groups int
	seq, maxPos                      int
	micro, global                    int
	layersPerVirtual, virtualStages  int
	first, last                      int
	layout                           string
	recompute, recomputeMethod       string
	recomputeNumLayers               int
	hasRecomputeNum                  bool
	gqa, distOpt, overlapGrad        bool
	overlapParam, cpuOffload         bool
	precisionAware, bf16, fp16       bool
	fp8ParamGather                   bool
	noOverlapP2P                     bool
	tpCommOverlap                    bool // --tp-comm-overlap
	offloadFraction                  float64
	hasFirst, hasLast                bool
	embeddingInSplit, lossInSplit    bool
}

// NumLayers is --num-layers of an argument list, after checking that every
// integer flag the checks read is an integer.
func NumLayers(argv []string) (int, error) {
	s, err := readMegatronSettings(argv)
	return s.numLayers, err
}

func readMegatronSettings(argv []string) (megatronSettings, error) {
	fl := Parse(argv)
	var s megatronSettings
	var errs []error
	intFlag := func(dst *int, name string, def int) {
		v, err := fl.Int(name, def)
		if err != nil {
			errs = append(errs, err)
		}
		*dst = v
	}
	intFlag(&s.tp, "--tensor-model-parallel-size", 1)
	intFlag(&s.pp, "--pipeline-model-parallel-size", 1)
	intFlag(&s.cp, "--context-parallel-size", 1)
	intFlag(&s.ulysses, UlyssesFlag, 1)
	intFlag(&s.ep, "--expert-model-parallel-size", 1)
	intFlag(&s.etp, "--expert-tensor-parallel-size", 0)
	intFlag(&s.experts, "--num-experts", 0)
	s.sp = fl.Has("--sequence-parallel")
	if s.dsMoE = isDeepSpeedMoE(fl); s.dsMoE {
		var bad yamlcheck.Problems
		s.dsExperts = dsMaxExperts(dsExpertCounts(fl, &bad))
		if err := bad.Err("megatron arguments"); err != nil {
			errs = append(errs, err)
		}
		intFlag(&s.dsEP, DSExpertParallelFlag, 1)
		s.dsExpertTP = fl.Has(DSExpertTPFlag)
	}
	intFlag(&s.numLayers, "--num-layers", 0)
	intFlag(&s.hidden, "--hidden-size", 0)
	intFlag(&s.heads, "--num-attention-heads", 0)
	intFlag(&s.groups, "--num-query-groups", 0)
	intFlag(&s.seq, "--seq-length", 0)
	intFlag(&s.maxPos, "--max-position-embeddings", 0)
	intFlag(&s.micro, "--micro-batch-size", 1)
	intFlag(&s.global, "--global-batch-size", 0)
	intFlag(&s.layersPerVirtual, "--num-layers-per-virtual-pipeline-stage", 0)
	intFlag(&s.virtualStages, "--num-virtual-stages-per-pipeline-rank", 0)
	intFlag(&s.first, "--decoder-first-pipeline-num-layers", 0)
	intFlag(&s.last, "--decoder-last-pipeline-num-layers", 0)
	intFlag(&s.recomputeNumLayers, "--recompute-num-layers", 0)
	_, s.hasFirst = fl.Last(FirstStageLayersFlag)
	_, s.hasLast = fl.Last(LastStageLayersFlag)
	s.embeddingInSplit, s.lossInSplit = fl.Has(EmbeddingInSplitFlag), fl.Has(LossInSplitFlag)
	_, s.hasRecomputeNum = fl.Last("--recompute-num-layers")
	s.layout, _ = fl.Last("--pipeline-model-parallel-layout")
	s.recompute, _ = fl.Last("--recompute-granularity")
	if _, ok := fl.Last("--recompute-activations"); ok {
		// Megatron's validate_args sets selective for this switch, then
		// rejects a --recompute-method beside it.
		if s.recompute == "full" {
			s.recompute = "full+activations"
		} else {
			s.recompute = "selective"
		}
	}
	s.recomputeMethod, _ = fl.Last("--recompute-method")
	s.offloadFraction = 1.0
	if v, ok := fl.Last("--optimizer-offload-fraction"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("--optimizer-offload-fraction %q: not a number", v))
		}
		s.offloadFraction = f
	}
	s.gqa = fl.Has("--group-query-attention")
	s.distOpt = fl.Has("--use-distributed-optimizer")
	s.overlapGrad = fl.Has("--overlap-grad-reduce")
	s.overlapParam = fl.Has("--overlap-param-gather")
	s.cpuOffload = fl.Has("--optimizer-cpu-offload")
	s.precisionAware = fl.Has("--use-precision-aware-optimizer")
	s.bf16 = fl.Has("--bf16")
	s.fp16 = fl.Has("--fp16")
	s.fp8ParamGather = fl.Has("--fp8-param-gather")
	s.noOverlapP2P = fl.Has("--no-overlap-p2p-communication")
	s.tpCommOverlap = fl.Has(TPCommOverlapFlag)
	return s, errors.Join(errs...)
}

// CheckArgs re-implements the start-up checks Megatron-LM's
// arguments.py applies (megatron-lm.md) to a final argument list for a job of
// worldSize ranks. A rendered launch that fails here would never start.
func CheckArgs(argv []string, worldSize int) error {
	return checkArgs(argv, worldSize, false)
}

// CheckDeepSpeedArgs is CheckArgs for a Megatron-DeepSpeed job: with
// pipeline stages its model is a DeepSpeed PipelineModule (GPTModelPipe,
// partition_method "type:transformer"), which splits any number of layers
// over the stages, so Megatron-Core's rule that PP divides the layers
// (microsoft/Megatron-DeepSpeed megatron/model/transformer.py
// _get_num_layers, used only by the model without DeepSpeed's pipeline)
// does not hold; every stage still needs a layer.
func CheckDeepSpeedArgs(argv []string, worldSize int) error {
	return checkArgs(argv, worldSize, true)
}

func checkArgs(argv []string, worldSize int, dsPipe bool) error {
	s, err := readMegatronSettings(argv)
	if err != nil {
		return err
	}
	s.dsPipe = dsPipe
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if s.tp < 1 || s.pp < 1 || s.cp < 1 || s.ep < 1 || s.ulysses < 1 {
		return fmt.Errorf("parallel sizes must be >= 1 (tp %d pp %d cp %d ep %d %s %d)", s.tp, s.pp, s.cp, s.ep, UlyssesFlag, s.ulysses)
	}
	model := s.tp * s.pp * s.cp
	if worldSize%model != 0 {
		return fmt.Errorf("world size %d is not divisible by tp*pp*cp = %d", worldSize, model)
	}
	if s.ulysses > 1 {
		// Megatron-DeepSpeed's validate_args: DeepSpeed-Ulysses ranks are
		// taken out of DP.
		if model *= s.ulysses; worldSize%model != 0 {
			return fmt.Errorf("world size %d is not divisible by tp %d x pp %d x %s %d", worldSize, s.tp, s.pp, UlyssesFlag, s.ulysses)
		}
	}
	dp := worldSize / model
	if s.heads > 0 && s.heads%s.tp != 0 {
		fail("--num-attention-heads %d is not divisible by tp %d", s.heads, s.tp)
	}
	if s.gqa && s.groups > 0 && s.groups%s.tp != 0 && s.tp%s.groups != 0 {
		fail("--num-query-groups %d and tp %d: neither divides the other", s.groups, s.tp)
	}
	if s.heads > 0 && s.hidden%s.heads != 0 {
		fail("--hidden-size %d is not divisible by --num-attention-heads %d", s.hidden, s.heads)
	}
	if s.tpCommOverlap && (s.tp == 1 || !s.sp) {
		// arguments.py turns sequence parallelism off at TP 1, then asserts it.
		fail("%s needs --sequence-parallel and tp > 1 (Megatron-LM: TP communication/GEMM overlap only runs with sequence parallelism)", TPCommOverlapFlag)
	}
	if s.cp > 1 && s.seq%(2*s.cp) != 0 {
		fail("--seq-length %d is not divisible by 2*cp = %d", s.seq, 2*s.cp)
	}
	if s.maxPos > 0 && s.seq > s.maxPos {
		fail("--max-position-embeddings %d < --seq-length %d", s.maxPos, s.seq)
	}
	if s.bf16 && s.fp16 {
		fail("--bf16 and --fp16 are both set")
	}
	vpp, err := s.checkStages()
	if err != nil {
		errs = append(errs, err)
	}
	if s.micro < 1 {
		fail("--micro-batch-size %d must be >= 1", s.micro)
	}
	if s.global > 0 && s.micro > 0 {
		if s.global%(s.micro*dp) != 0 {
			fail("--global-batch-size %d is not divisible by micro-batch %d * dp %d", s.global, s.micro, dp)
		} else if vpp > 1 && (s.global/(s.micro*dp))%s.pp != 0 {
			fail("interleaved schedule: %d micro-batches is not a multiple of pp %d", s.global/(s.micro*dp), s.pp)
		}
	}
	errs = append(errs, s.checkRecompute()...)
	errs = append(errs, s.checkOptimizer()...)
	errs = append(errs, s.checkMoE(worldSize)...)
	return errors.Join(errs...)
}

// checkMoE applies Megatron-Core's expert-parallel checks: arguments.py
// requires num_experts % expert_model_parallel_size == 0;
// parallel_state.initialize_model_parallel raises unless the world size
// divides by expert_tensor_parallel_size (default tp) x
// expert_model_parallel_size x pipeline size; ModelParallelConfig refuses
// "expert parallelism and tensor parallelism" without sequence
// parallelism.
func (s megatronSettings) checkMoE(world int) []error {
	if s.dsMoE {
		return s.checkDeepSpeedMoE(world)
	}
	var errs []error
	etp := s.etp
	if etp == 0 {
		etp = s.tp
	}
	if etp < 1 {
		return []error{fmt.Errorf("--expert-tensor-parallel-size %d must be >= 1", s.etp)}
	}
	if (s.ep > 1 || s.etp > 0) && s.experts == 0 {
		errs = append(errs, fmt.Errorf("--expert-model-parallel-size %d / --expert-tensor-parallel-size %d need --num-experts", s.ep, s.etp))
	}
	if s.experts > 0 && s.experts%s.ep != 0 {
		errs = append(errs, fmt.Errorf("--num-experts %d is not divisible by --expert-model-parallel-size %d", s.experts, s.ep))
	}
	if d := etp * s.ep * s.pp; world%d != 0 {
		errs = append(errs, fmt.Errorf("world size %d is not divisible by expert tensor x expert model x pipeline parallel size %d*%d*%d", world, etp, s.ep, s.pp))
	}
	if s.ep > 1 && s.tp > 1 && !s.sp {
		errs = append(errs, fmt.Errorf("--expert-model-parallel-size %d with --tensor-model-parallel-size %d needs --sequence-parallel", s.ep, s.tp))
	}
	return errs
}

// checkStages validates the layer split flags and returns the number of
// virtual stages per pipeline rank they imply.
func (s megatronSettings) checkStages() (int, error) {
	if s.dsPipe && s.pp > 1 {
		if s.numLayers > 0 && s.numLayers < s.pp {
			return 0, fmt.Errorf("--num-layers %d is fewer than pp %d: DeepSpeed's PipelineModule would leave a stage without a layer", s.numLayers, s.pp)
		}
		return 1, nil
	}
	n := 0
	for _, set := range []bool{s.layersPerVirtual > 0, s.virtualStages > 0, s.layout != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return 0, errors.New("at most one of --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout")
	}
	if s.layout != "" {
		if s.hasFirst || s.hasLast || s.embeddingInSplit || s.lossInSplit {
			return 0, fmt.Errorf("--pipeline-model-parallel-layout cannot be combined with %s, %s, %s or %s", FirstStageLayersFlag, LastStageLayersFlag, EmbeddingInSplitFlag, LossInSplitFlag)
		}
		return checkLayout(s.layout, s.pp, s.numLayers, s.noOverlapP2P)
	}
	split, err := s.split()
	if err != nil {
		return 0, err
	}
	if split.VPP > 1 {
		if err := checkInterleaved(s.pp, s.noOverlapP2P); err != nil {
			return 0, err
		}
	}
	if s.numLayers > 0 {
		if _, err := split.StageLayers(s.numLayers); err != nil {
			return 0, err
		}
	}
	return split.VPP, nil
}

// split is the layer split the flags ask for (arguments.py validate_args
// derives the virtual stages; Split checks the rest as Megatron-Core does).
func (s megatronSettings) split() (Split, error) {
	if (s.hasFirst && s.first <= 0) || (s.hasLast && s.last <= 0) {
		return Split{}, fmt.Errorf("%s %d and %s %d must be > 0 where given", FirstStageLayersFlag, s.first, LastStageLayersFlag, s.last)
	}
	sp := Split{PP: s.pp, VPP: 1, First: s.first, Last: s.last, Embedding: s.embeddingInSplit, Loss: s.lossInSplit}
	switch {
	case s.virtualStages > 0:
		sp.VPP = s.virtualStages
	case s.layersPerVirtual > 0:
		if s.hasFirst || s.hasLast {
			return Split{}, fmt.Errorf("an uneven first/last stage needs --num-virtual-stages-per-pipeline-rank, not --num-layers-per-virtual-pipeline-stage (Megatron-LM's validate_args)")
		}
		total := sp.accountedLayers(s.numLayers)
		if s.pp < 1 || total%s.pp != 0 || (total/s.pp)%s.layersPerVirtual != 0 {
			return Split{}, fmt.Errorf("--num-layers %d (with the accounted embedding and loss: %d) over pp %d is not divisible by --num-layers-per-virtual-pipeline-stage %d", s.numLayers, total, s.pp, s.layersPerVirtual)
		}
		sp.VPP = total / s.pp / s.layersPerVirtual
	}
	return sp, nil
}

func checkInterleaved(pp int, noOverlapP2P bool) error {
	if pp < 2 {
		return errors.New("the interleaved schedule needs pp > 1")
	}
	if noOverlapP2P && pp < 3 {
		return errors.New("the interleaved schedule with --no-overlap-p2p-communication needs pp > 2")
	}
	return nil
}

// checkLayout parses a --pipeline-model-parallel-layout string and checks it
// against pp and the layer count; it returns the virtual stages it implies.
func checkLayout(layout string, pp, numLayers int, noOverlapP2P bool) (int, error) {
	flat, err := expandLayout(layout)
	if err != nil {
		return 0, fmt.Errorf("--pipeline-model-parallel-layout %q: %w", layout, err)
	}
	stages := strings.Split(flat, "|")
	if len(stages)%pp != 0 {
		return 0, fmt.Errorf("--pipeline-model-parallel-layout has %d stages, not a multiple of pp %d", len(stages), pp)
	}
	if strings.Count(flat, "E") != 1 || !strings.HasPrefix(stages[0], "E") {
		return 0, errors.New("--pipeline-model-parallel-layout needs exactly one E, at the start of the first stage")
	}
	if strings.Count(flat, "L") != 1 || !strings.HasSuffix(stages[len(stages)-1], "L") {
		return 0, errors.New("--pipeline-model-parallel-layout needs exactly one L, at the end of the last stage")
	}
	if t := strings.Count(flat, "t"); t != numLayers {
		return 0, fmt.Errorf("--pipeline-model-parallel-layout has %d decoder layers, --num-layers is %d", t, numLayers)
	}
	vpp := len(stages) / pp
	if vpp > 1 {
		if err := checkInterleaved(pp, noOverlapP2P); err != nil {
			return 0, err
		}
	}
	return vpp, nil
}

// expandLayout expands repeats (`x*n`, `(...)*n`) and drops commas and
// spaces, leaving only E, t, m, L and |.
func expandLayout(s string) (string, error) {
	out, rest, err := expandSeq(strings.NewReplacer(",", "", " ", "").Replace(s), 0)
	if err != nil {
		return "", err
	}
	if rest != "" {
		return "", fmt.Errorf("unbalanced ) near %q", rest)
	}
	return out, nil
}

func expandSeq(s string, depth int) (string, string, error) {
	var b strings.Builder
	for s != "" {
		var unit string
		switch c := s[0]; {
		case c == ')':
			if depth == 0 {
				return "", "", errors.New("unbalanced )")
			}
			return b.String(), s, nil
		case c == '(':
			inner, rest, err := expandSeq(s[1:], depth+1)
			if err != nil {
				return "", "", err
			}
			if rest == "" || rest[0] != ')' {
				return "", "", errors.New("unbalanced (")
			}
			unit, s = inner, rest[1:]
		case strings.IndexByte("EtmL|", c) >= 0:
			unit, s = string(c), s[1:]
		default:
			return "", "", fmt.Errorf("unexpected %q", c)
		}
		if strings.HasPrefix(s, "*") {
			j := 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, err := strconv.Atoi(s[1:j])
			if err != nil {
				return "", "", fmt.Errorf("bad repeat count after %q", unit)
			}
			unit, s = strings.Repeat(unit, n), s[j:]
		}
		b.WriteString(unit)
	}
	if depth > 0 {
		return "", "", errors.New("unbalanced (")
	}
	return b.String(), "", nil
}

func (s megatronSettings) checkRecompute() []error {
	var errs []error
	switch s.recompute {
	case "full+activations":
		errs = append(errs, errors.New("--recompute-activations makes Megatron recompute selectively, which contradicts --recompute-granularity full and its --recompute-method"))
	case "":
		if s.recomputeMethod != "" || s.hasRecomputeNum {
			errs = append(errs, errors.New("--recompute-method/--recompute-num-layers need --recompute-granularity full"))
		}
	case "full":
		if s.recomputeMethod != "uniform" && s.recomputeMethod != "block" {
			errs = append(errs, fmt.Errorf("--recompute-granularity full needs --recompute-method uniform|block (got %q)", s.recomputeMethod))
		}
		if !s.hasRecomputeNum || s.recomputeNumLayers < 1 {
			errs = append(errs, errors.New("--recompute-granularity full needs --recompute-num-layers >= 1"))
		}
	case "selective":
		if s.recomputeMethod != "" || s.hasRecomputeNum {
			errs = append(errs, errors.New("--recompute-granularity selective takes no --recompute-method/--recompute-num-layers"))
		}
	default:
		errs = append(errs, fmt.Errorf("--recompute-granularity %q: want full or selective", s.recompute))
	}
	return errs
}

func (s megatronSettings) checkOptimizer() []error {
	var errs []error
	if s.overlapParam && !(s.distOpt && s.overlapGrad) {
		errs = append(errs, errors.New("--overlap-param-gather needs --use-distributed-optimizer and --overlap-grad-reduce"))
	}
	if s.fp8ParamGather && !s.distOpt {
		// arguments.py: "--fp8-param-gather only supported with distributed
		// optimizer" (or FSDP, which pipette-launch does not plan).
		errs = append(errs, errors.New("--fp8-param-gather needs --use-distributed-optimizer"))
	}
	if s.cpuOffload && !s.precisionAware {
		errs = append(errs, errors.New("--optimizer-cpu-offload needs --use-precision-aware-optimizer"))
	}
	if s.cpuOffload && !s.distOpt {
		errs = append(errs, errors.New("--optimizer-cpu-offload needs --use-distributed-optimizer"))
	}
	if s.offloadFraction < 0 || s.offloadFraction > 1 {
		errs = append(errs, fmt.Errorf("--optimizer-offload-fraction %g outside 0..1", s.offloadFraction))
	}
	return errs
}

// StageLayers returns the decoder layers per pipeline stage (stage i =
// vpp_index*PP + pp_rank) that the user's own split flags give, and the
// virtual stages per rank; nil when the arguments split evenly. Launches
// without planning use it so the user's split survives rendering.
func StageLayers(args []string) ([]int, int, error) {
	s, err := readMegatronSettings(args)
	if err != nil {
		return nil, 0, err
	}
	vpp, err := s.checkStages()
	if err != nil {
		return nil, 0, err
	}
	if s.layout != "" {
		flat, _ := expandLayout(s.layout)
		var stages []int
		for _, st := range strings.Split(flat, "|") {
			stages = append(stages, strings.Count(st, "t"))
		}
		return stages, vpp, nil
	}
	if !s.hasFirst && !s.hasLast && !s.embeddingInSplit && !s.lossInSplit {
		return nil, vpp, nil
	}
	split, err := s.split()
	if err != nil {
		return nil, 0, err
	}
	stages, err := split.StageLayers(s.numLayers)
	if err != nil {
		return nil, 0, err
	}
	return stages, vpp, nil
}

// checkDeepSpeedMoE applies DeepSpeed's checks to Megatron-DeepSpeed's
// expert flags (dsmoe.go): moe/layer.py asserts num_experts % ep_size ==
// 0; utils/groups.py asserts that EP divides the ranks of a pipeline stage
// (whole experts) or, with --enable-expert-tensor-parallelism, the
// data-parallel size.
func (s megatronSettings) checkDeepSpeedMoE(world int) []error {
	if s.dsExperts <= 1 {
		return nil // a dense model: DeepSpeed builds no MoE layer
	}
	if s.dsEP < 1 {
		return []error{fmt.Errorf("%s %d must be >= 1", DSExpertParallelFlag, s.dsEP)}
	}
	var errs []error
	if s.dsExperts%s.dsEP != 0 {
		errs = append(errs, fmt.Errorf("%s %d does not divide --num-experts %d (DeepSpeed's MoE layer asserts num_experts %% ep_size == 0)", DSExpertParallelFlag, s.dsEP, s.dsExperts))
	}
	if s.dsExpertTP {
		if dp := world / (s.tp * s.pp * s.ulysses); dp%s.dsEP != 0 {
			errs = append(errs, fmt.Errorf("%s %d does not divide the data-parallel size %d (with %s DeepSpeed's groups.py asserts dp_world_size %% ep_size == 0)", DSExpertParallelFlag, s.dsEP, dp, DSExpertTPFlag))
		}
	} else if stage := world / s.pp; stage%s.dsEP != 0 {
		errs = append(errs, fmt.Errorf("%s %d does not divide the %d ranks of a pipeline stage (DeepSpeed's groups.py asserts (world / pp) %% ep_size == 0)", DSExpertParallelFlag, s.dsEP, stage))
	}
	return errs
}
