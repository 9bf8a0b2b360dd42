package planner

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// Job is what a launch asks the planner: the training script and its own
// arguments, what the user fixed on the launcher's command line, and the
// user's own DeepSpeed config. Its settings are constraints: a plan keeps
// what the script and the config say, or Choose says what contradicts.
type Job struct {
	Framework parallel.Framework
	Script    string
	Args      []string // the script's own arguments
	// GlobalBatch is the launcher's --global-batch-size (0: the script's).
	GlobalBatch int
	// SequenceParallel is the launcher's --sequence-parallel (nil: auto,
	// the script's choice), given as SequenceParallelFlag.
	SequenceParallel     *bool
	SequenceParallelFlag string
	// Model loads the launcher's --model, the shape planned when the
	// script's arguments have none (nil: no --model).
	Model func() (model.Model, error)
	// Vocab reads the vocabulary of the script's tokenizer (nil: none).
	Vocab megatron.VocabFunc
	// TPOverlapCfg is the userbuffers configuration the script's
	// --tp-comm-overlap-cfg names, read by the caller (nil: none, and
	// Transformer Engine's defaults are priced).
	TPOverlapCfg *parallel.TPOverlapCfg
	// DS is the user's DeepSpeed config (nil: none); OverrideDS lets the
	// plan change its settings instead of keeping them as constraints.
	DS         *deepspeed.UserConfig
	OverrideDS bool
	// PlanIndex is which of the ranked plans to run, from 1.
	PlanIndex int
	// MemoryHeadroom is the share of each GPU's memory plans leave free
	// (search.Options.MemoryHeadroom).
	MemoryHeadroom float64
	// UseAllGPUs keeps plans on every GPU of the cluster
	// (search.Options.UseAllGPUs).
	UseAllGPUs bool
	// Pins are the launcher's --recompute, --no-offload and
	// --distributed-optimizer (Pins).
	Pins Pins
	// DP pins the data-parallel size (0: free): an elastic restart's
	// DeepSpeed checkpoint that loads only at the size that saved it. When
	// no layout with it uses every GPU, the search may leave hosts idle
	// (Plan.Idle says which and why) even with UseAllGPUs.
	DP int
}

// Choice is what Choose decides: the placed plan and its one-line summary,
// the warnings to print before the job, and when the plan was searched,
// the search (for reports) and its model. ShapeModel is the --model the
// plan is for when the script's arguments lack its shape: the job must
// get its shape flags (templates.ModelShapeArgs).
type Choice struct {
	Plan       *search.Plan
	Summary    string
	Warnings   []string
	Searched   *search.Result
	Model      model.Model
	ShapeModel *model.Model
}

// Choose returns the placed plan to run on c. On a cluster file (planned)
// with a known model the planner searches, with the script's own settings
// (Megatron flags, the DeepSpeed config) as constraints; plain torch jobs,
// and jobs on listed hosts, run in torchrun's rank order with the parallel
// sizes the script's arguments fix. Errors are the job's inputs
// contradicting each other or the cluster, except a *search.NoFitError
// (wrapped): the model does not fit.
func Choose(c *cluster.Cluster, j Job, planned bool) (*Choice, error) {
	ch := &Choice{}
	fw := j.Framework
	megatronArgs := megatron.LooksLike(j.Script, j.Args)
	vocab := j.Vocab
	if vocab == nil {
		vocab = func(megatron.TokenizerArgs) (int, string, error) { return 0, "", errors.New("no tokenizer files") }
	}
	m, fixed, found, err := megatron.ModelFromArgsVocab(j.Args, vocab)
	// unsized says why the script's model cannot be sized here: the job
	// still runs with the sizes its flags fix, planned only with --model.
	var unsized error
	if ue := (*megatron.UnsizedError)(nil); found && errors.As(err, &ue) && fw != parallel.FrameworkTorch {
		if fixed, err = megatron.ConstraintsFromArgs(j.Args); err != nil {
			return nil, err
		}
		unsized, m = errUnsized(j.Script, j.Args, err), model.Model{}
	}
	if found && err != nil && unsized == nil && fw != parallel.FrameworkTorch {
		return nil, err // the flags contradict each other: Megatron would refuse them too
	}
	if megatronArgs && fw != parallel.FrameworkTorch {
		ch.Warnings = append(ch.Warnings, megatron.UnmodelledFeatures(j.Args)...)
		if planned && found && fixed.Precision == gpu.PrecisionFP32 {
			// Megatron's default without --bf16/--fp16/--fp8-format.
			ch.Warnings = append(ch.Warnings, "the script passes neither --bf16 nor --fp16, so Megatron trains in fp32: planned and sized as fp32 (4-byte weights and activations, fp32 GEMM rates); add --bf16 for mixed precision")
		}
	}
	micro, global, err := megatron.BatchArgs(j.Args)
	if err != nil && fw != parallel.FrameworkTorch {
		return nil, err
	}
	if j.GlobalBatch > 0 {
		if global > 0 && global != j.GlobalBatch {
			return nil, fmt.Errorf("--global-batch-size %d contradicts the script's --global-batch-size %d: give one", j.GlobalBatch, global)
		}
		global = j.GlobalBatch
	}
	if !found {
		fixed = parallel.Constraints{ZeroStage: -1}
		if !megatronArgs && fw == parallel.FrameworkDeepSpeed {
			// A plain DeepSpeed script only does data parallelism (+ ZeRO).
			fixed.TP, fixed.PP, fixed.CP = 1, 1, 1
		}
	}
	if j.DP > 0 {
		fixed.DP = j.DP
	}
	if err := ApplySequenceParallel(j.SequenceParallel, j.SequenceParallelFlag, &fixed, found); err != nil {
		return nil, err
	}
	if fixed.TPCommOverlap {
		fixed.TPOverlapCfg = j.TPOverlapCfg
	}
	if err := applyPins(j.Pins, &fixed, fw, planned); err != nil {
		return nil, err
	}
	if fw == parallel.FrameworkTorch || !planned {
		// The ranks are the world: Megatron checks first that the world
		// divides by the script's model-parallel sizes (validate_args'
		// total_model_size), before the layer split.
		if _, err := TorchrunDP(c, fixed); err != nil {
			return nil, err
		}
	}
	if megatronArgs && fw != parallel.FrameworkTorch {
		// The user's own layer split stands: rendered as given without
		// planning, a constraint on the search with it.
		stages, vpp, err := megatron.StageLayers(j.Args)
		if err != nil {
			return nil, fmt.Errorf("script arguments: %v", err)
		}
		if stages != nil || vpp > 1 {
			fixed.VPP, fixed.StageLayers = max(fixed.VPP, vpp), stages
		}
	}
	if fw == parallel.FrameworkTorch || !planned {
		ch.Plan, ch.Summary, err = torchrunOrderDS(c, fw, fixed, micro, global, j.DS)
		return ch, err
	}
	if !found || m.NumLayers == 0 {
		if j.Model == nil {
			if fw == parallel.FrameworkMegatron && unsized == nil {
				unsized = errors.New("the script's arguments have no --num-layers/--hidden-size/--num-attention-heads/--seq-length")
			}
			if unsized != nil {
				ch.Warnings = append(ch.Warnings, fmt.Sprintf("not planned: %v; the job runs in torchrun's rank order with the parallel sizes the script's flags give. To plan it, pass --model (a model YAML or a preset: %s); --framework torch runs it unplanned without this note", unsized, strings.Join(model.PresetNames(), ", ")))
			}
			ch.Plan, ch.Summary, err = torchrunOrderDS(c, fw, fixed, micro, global, j.DS)
			return ch, err
		}
		if m, err = j.Model(); err != nil {
			return nil, err
		}
		if t := megatron.Tokenizer(j.Args); t.Type != "" {
			// Megatron sizes the embedding by the script's tokenizer, whatever
			// the model file says.
			if n, _, err := vocab(t); err == nil && n > 0 {
				m.Vocab, found = n, true
			}
		}
		if megatronArgs || fw == parallel.FrameworkMegatron {
			ch.ShapeModel = &m // the job must train the model that was planned
		}
	}
	if err := CheckFixedSizes(m, fixed, c.TotalGPUs()); err != nil {
		return nil, err
	}
	p, n, err := searchJob(c, m, j, fixed, micro, global, ch)
	if err != nil {
		return nil, err
	}
	ch.Plan, ch.Model = p, m
	hint := "--use-all-gpus plans on every GPU or refuses"
	if j.DP > 0 {
		hint = fmt.Sprintf("the DP %d pinned leaves no layout on every GPU", j.DP)
	}
	ch.Summary = summary(p, j.PlanIndex, n, hint) + vocabNote(m, p.TP, vocab, j.Args, found)
	if j.DS != nil && j.DS.Elastic != nil {
		ch.Summary += j.DS.BatchNote(p.DP) // the section, not the plan, chose the batch
	}
	if megatronArgs {
		if w := sizesBeyondDefaults(fixed, p); w != "" {
			ch.Warnings = append(ch.Warnings, w)
		}
		if w := scriptKnobsWarning(m, fixed, p, j.MemoryHeadroom, j.PlanIndex); w != "" {
			ch.Warnings = append(ch.Warnings, w)
		}
	}
	return ch, nil
}

// sizesBeyondDefaults names the parallel sizes the plan sets that the
// script's arguments leave at Megatron's default, 1: the job then runs
// differently from the script as written, so the launch says so, and how
// to keep the default ("" when the plan sets none).
func sizesBeyondDefaults(fixed parallel.Constraints, p *search.Plan) string {
	var set []string
	add := func(given, planned int, flag string) {
		if given == 0 && planned > 1 {
			set = append(set, fmt.Sprintf("%s %d", flag, planned))
		}
	}
	add(fixed.TP, p.TP, "--tensor-model-parallel-size")
	add(fixed.PP, p.PP, "--pipeline-model-parallel-size")
	if !p.Ulysses {
		add(fixed.CP, p.CP, "--context-parallel-size")
	}
	add(fixed.VPP, p.VPP, "--num-virtual-stages-per-pipeline-rank")
	if p.EP > 0 {
		ep, _ := p.ExpertParallel()
		add(fixed.EP, ep, "--expert-model-parallel-size")
	}
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf("the plan sets %s, which the script's arguments leave at Megatron's default 1; to keep a default, give it among the script's arguments (e.g. --pipeline-model-parallel-size 1) and the plan keeps it", strings.Join(set, ", "))
}

// errUnsized says why the script's Megatron flags give no model to size:
// the model families the planner does not size (encoder-decoder, BERT,
// hybrid Mamba, multimodal: Megatron's pretrain_*.py scripts and their
// flags say which) or else err, the flags it lacks.
func errUnsized(script string, args []string, err error) error {
	a := megatron.Parse(args)
	name := strings.ToLower(filepath.Base(script))
	switch {
	case strings.Contains(name, "t5") || a.Has("--encoder-num-layers") || a.Has("--decoder-num-layers"):
		return errors.New("the script trains an encoder-decoder model (T5), which the planner does not size")
	case strings.Contains(name, "mamba") || strings.Contains(name, "hybrid") || a.Has("--hybrid-override-pattern") || a.Has("--hybrid-attention-ratio"):
		return errors.New("the script trains a hybrid Mamba model, which the planner does not size")
	case strings.Contains(name, "bert") || strings.HasPrefix(a.Value("--tokenizer-type"), "BertWordPiece"):
		return errors.New("the script trains a BERT model, which the planner does not size")
	case strings.Contains(filepath.ToSlash(script), "multimodal") || strings.Contains(name, "vlm") || strings.Contains(name, "llava"):
		return fmt.Errorf("the script trains a multimodal model, which the planner does not size (%v)", err)
	}
	return err
}

// searchJob runs the search with the user's DeepSpeed config as
// constraints (unless OverrideDS) and records it in ch. When no plan keeps
// the config, the error names the keys the best plan without them changes.
func searchJob(c *cluster.Cluster, m model.Model, j Job, fixed parallel.Constraints, micro, global int, ch *Choice) (*search.Plan, int, error) {
	ds, fw := j.DS, j.Framework
	free := fixed
	keep := ds != nil && !j.OverrideDS
	if ds != nil {
		var err error
		if global, err = ds.GlobalBatch(global); err != nil {
			return nil, 0, err
		}
		if keep {
			if err := ds.Constrain(&fixed, micro, global); err != nil {
				return nil, 0, err
			}
		}
	}
	find := func(fx parallel.Constraints, global int, keepConfig bool) ([]search.Plan, error) {
		so := search.Options{Framework: fw, GlobalBatch: global, Fixed: fx, TopK: max(10, j.PlanIndex), Seed: 1, MemoryHeadroom: j.MemoryHeadroom,
			PrecisionFromArgs: true, UseAllGPUs: j.UseAllGPUs}
		res, err := search.Search(c, m, so)
		if err != nil && j.DP > 0 && fx.DP == j.DP && so.UseAllGPUs {
			// The pinned DP may not divide every GPU: a plan on fewer
			// hosts keeps it (the search names the hosts left idle).
			so.UseAllGPUs = false
			res, err = search.Search(c, m, so)
		}
		if err != nil {
			// A *search.NoFitError stays one: the model does not fit this
			// cluster, and its message says what would help.
			return nil, fmt.Errorf("plan %s for %s: %w", m.Name, fw, err)
		}
		var kept []search.Plan
		for _, p := range res.Plans {
			if !keepConfig || len(ds.PlanChanges(p.Config)) == 0 {
				kept = append(kept, p)
			}
		}
		r := *res
		r.Plans = kept
		ch.Searched = &r
		return kept, nil
	}
	var plans []search.Plan
	var err error
	switch {
	case ds != nil && ds.Elastic != nil:
		// The section decides the batch whether or not the plan may change
		// the config's other settings: batch keys beside it are refused or
		// ignored by DeepSpeed, never used.
		plans, err = searchElastic(c, j, fixed, micro, global, ch, func(fx parallel.Constraints, global int) ([]search.Plan, error) {
			return find(fx, global, keep)
		})
		if err != nil {
			return nil, 0, err // no size of the section's: an *InvalidWorldError stays one
		}
	case global == 0:
		return nil, 0, errors.New("no global batch size: pass --global-batch-size (or the script's own --global-batch-size)")
	default:
		plans, err = find(fixed, global, keep)
	}
	if keep && len(plans) == 0 {
		free.MicroBatch = max(free.MicroBatch, micro)
		var best *parallel.Config
		if global > 0 { // (an elasticity section's batch is per size: none to try)
			alt, altErr := find(free, global, false)
			if altErr == nil && len(alt) > 0 {
				best = &alt[0].Config
			} else if err == nil {
				err = altErr
			}
		}
		return nil, 0, ds.Conflict(best, err)
	}
	if err != nil {
		return nil, 0, err
	}
	if j.PlanIndex > len(plans) {
		return nil, 0, fmt.Errorf("--plan %d: only %d plans were found", j.PlanIndex, len(plans))
	}
	p := plans[j.PlanIndex-1]
	p.Framework = fw
	return &p, len(plans), nil
}

// torchrunOrderDS is TorchrunOrder with the batch sizes, ZeRO stage and
// offload of the user's DeepSpeed config, as DeepSpeed derives them for
// torchrun's data-parallel size.
func torchrunOrderDS(c *cluster.Cluster, fw parallel.Framework, fixed parallel.Constraints, micro, global int, ds *deepspeed.UserConfig) (*search.Plan, string, error) {
	offloadParams := false
	if ds != nil {
		dp, err := TorchrunDP(c, fixed)
		if err != nil {
			return nil, "", err
		}
		if err := ds.Unplanned(&fixed, &micro, &global, dp); err != nil {
			return nil, "", err
		}
		offloadParams = ds.OffloadsParams()
	}
	return TorchrunOrder(c, fw, fixed, micro, global, offloadParams)
}

// ApplySequenceParallel applies the launcher's --sequence-parallel (want,
// given as flag; nil: auto) to what the script's flags fixed: auto keeps
// the script's choice (from its flags, or the planner's when the script has
// no Megatron flags); on/off set it, and contradicting the script is an
// error.
func ApplySequenceParallel(want *bool, flag string, fixed *parallel.Constraints, fromScript bool) error {
	if want == nil {
		return nil
	}
	if fromScript && fixed.SequenceParallel != nil && *fixed.SequenceParallel != *want {
		return fmt.Errorf("--sequence-parallel %s contradicts the script's arguments (they %s --sequence-parallel): change one", flag,
			map[bool]string{true: "pass", false: "do not pass"}[*fixed.SequenceParallel])
	}
	fixed.SequenceParallel = want
	return nil
}

// vocabNote says where the planned vocabulary came from and how Megatron
// pads it, for the plan's summary line.
func vocabNote(m model.Model, tp int, vocab megatron.VocabFunc, args []string, fromArgs bool) string {
	src := "the model"
	if fromArgs {
		src = "--vocab-size"
		if t := megatron.Tokenizer(args); t.Type != "" {
			src = t.Type
			if _, from, err := vocab(t); err == nil && from != "" {
				src += " " + from
			}
		}
	}
	return fmt.Sprintf("; vocabulary %d (%s), padded to %d", m.Vocab, src, m.PaddedVocab(tp))
}

// Summary is the one line a launch prints about plan p, the idx-th of n.
func Summary(p *search.Plan, idx, n int) string {
	return summary(p, idx, n, "--use-all-gpus plans on every GPU or refuses")
}

// summary is Summary with idleHint, what to say of the hosts a plan
// leaves idle.
func summary(p *search.Plan, idx, n int, idleHint string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %d of %d (%s): TP %d PP %d DP %d %s %d", idx, n, p.Framework, p.TP, p.PP, p.DP, seqSplitName(p.Config), max(p.CP, 1))
	if p.VPP > 1 {
		fmt.Fprintf(&b, " VPP %d", p.VPP)
	}
	if p.EP > 0 { // an MoE plan
		ep, etp := p.ExpertParallel()
		fmt.Fprintf(&b, " EP %d ETP %d", ep, etp)
	}
	fmt.Fprintf(&b, ", micro-batch %d, global batch %d", p.MicroBatch, p.GlobalBatch)
	if len(p.StageLayers) > 0 {
		fmt.Fprintf(&b, ", layers per stage %v", p.StageLayers)
	}
	if p.Recompute != "" && p.Recompute != parallel.RecomputeNone {
		fmt.Fprintf(&b, ", recompute %s", p.Recompute)
	}
	if p.Framework == parallel.FrameworkDeepSpeed {
		fmt.Fprintf(&b, ", ZeRO-%d", p.ZeroStage)
	}
	if p.DistributedOptimizer {
		b.WriteString(", distributed optimizer")
	}
	if p.Offload.OptimizerFraction > 0 {
		fmt.Fprintf(&b, ", optimizer offload %g", p.Offload.OptimizerFraction)
	}
	if p.Offload.Params {
		b.WriteString(", parameter offload")
	}
	fmt.Fprintf(&b, "; predicted %.3f s/iteration, %.1f of %.1f GiB per GPU",
		p.Predicted.IterationSeconds, p.Memory.PeakBytesPerGPU/(1<<30), p.Memory.GPUCapacityBytes/(1<<30))
	if p.Idle != nil {
		fmt.Fprintf(&b, "; leaves %d GPUs on %s idle, nothing is started there (%s; %s)",
			p.Idle.GPUs, strings.Join(p.Idle.Hosts, ", "), p.Idle.Reason, idleHint)
	}
	return b.String()
}
