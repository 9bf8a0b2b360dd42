package templates

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/megatron"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Megatron-LM flags pipette-launch manages. The planner decides them, so
// the user's own occurrences are compared with the plan and then replaced.
var (
	plannedValueFlags = []string{
		"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
		"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
		"--pipeline-model-parallel-layout", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
		"--micro-batch-size", "--global-batch-size",
		"--recompute-granularity", "--recompute-method", "--recompute-num-layers", "--optimizer-offload-fraction",
		"--expert-model-parallel-size", "--expert-tensor-parallel-size", megatron.UlyssesFlag, megatron.DSExpertParallelFlag,
	}
	plannedSwitches = []string{
		"--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
		"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--overlap-cpu-optimizer-d2h-h2d",
		"--recompute-activations", megatron.EmbeddingInSplitFlag, megatron.LossInSplitFlag,
	}
	megatronPlannedFlags = flagSet(plannedValueFlags, plannedSwitches)
)

func flagSet(lists ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, f := range l {
			m[f] = true
		}
	}
	return m
}

// MegatronPlanArgs are the Megatron-LM flags that realise cfg, in a fixed
// order.
func MegatronPlanArgs(cfg parallel.Config, numLayers int) ([]string, error) {
	a := []string{
		"--tensor-model-parallel-size", strconv.Itoa(cfg.TP),
		"--pipeline-model-parallel-size", strconv.Itoa(cfg.PP),
		"--context-parallel-size", strconv.Itoa(max(cfg.CP, 1)),
	}
	if cfg.SequenceParallel && cfg.TP > 1 {
		a = append(a, "--sequence-parallel")
	}
	split, err := stageFlags(cfg, numLayers)
	if err != nil {
		return nil, err
	}
	a = append(a, split...)
	a = append(a, "--micro-batch-size", strconv.Itoa(cfg.MicroBatch),
		"--global-batch-size", strconv.Itoa(cfg.GlobalBatch))
	a = append(a, megatron.RecomputeArgs(cfg.Recompute)...)
	offload := cfg.Offload.OptimizerFraction > 0
	// Megatron's CPU offload is implemented inside the distributed optimizer
	// (HybridDeviceOptimizer wraps its shards), so offload implies it.
	distOpt := cfg.DistributedOptimizer || offload
	if distOpt {
		a = append(a, "--use-distributed-optimizer")
	}
	if cfg.DP > 1 || distOpt {
		a = append(a, "--overlap-grad-reduce")
	}
	if distOpt {
		a = append(a, "--overlap-param-gather")
	}
	if offload {
		a = append(a, megatron.OffloadArgs(cfg.Offload.OptimizerFraction)...)
	}
	return append(a, moeArgs(cfg)...), nil
}

// moeArgs renders an MoE plan's expert parallelism (EP > 0 only in plans
// of MoE models): the sizes, and the dispatcher and grouped GEMM the cost
// model prices (the alltoall dispatcher, one grouped GEMM for the local
// experts). A user's own --moe-token-dispatcher-type or --moe-grouped-gemm
// is kept (MergeMegatronArgs drops the planned one).
func moeArgs(cfg parallel.Config) []string {
	if cfg.EP < 1 {
		return nil
	}
	ep, etp := cfg.ExpertParallel()
	return []string{"--expert-model-parallel-size", strconv.Itoa(ep), "--expert-tensor-parallel-size", strconv.Itoa(etp),
		"--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm"}
}

// stageFlags renders the split of decoder layers over pipeline stages:
// nothing when even, virtual stages when even with VPP > 1, first/last
// flags when only the outer stages differ, else a full layout string.
func stageFlags(cfg parallel.Config, numLayers int) ([]string, error) {
	vpp := max(cfg.VPP, 1)
	stages := cfg.StageLayers
	if len(stages) == 0 {
		if numLayers%(cfg.PP*vpp) != 0 {
			return nil, fmt.Errorf("plan has no stage split and %d layers do not divide over %d stages", numLayers, cfg.PP*vpp)
		}
		stages = make([]int, cfg.PP*vpp)
		for i := range stages {
			stages[i] = numLayers / (cfg.PP * vpp)
		}
	}
	if len(stages) != cfg.PP*vpp {
		return nil, fmt.Errorf("plan has %d stage sizes, want PP*VPP = %d", len(stages), cfg.PP*vpp)
	}
	total := 0
	for _, n := range stages {
		total += n
	}
	if numLayers > 0 && total != numLayers {
		return nil, fmt.Errorf("plan's stages hold %d layers, model has %d", total, numLayers)
	}
	if allEqual(stages) {
		if vpp > 1 {
			return []string{"--num-virtual-stages-per-pipeline-rank", strconv.Itoa(vpp)}, nil
		}
		return nil, nil
	}
	if vpp == 1 && cfg.PP >= 2 {
		if f := firstLastFlags(stages); f != nil {
			return f, nil
		}
	}
	// Megatron's own split flags (the embedding and loss accounted as
	// layers, uneven first/last ranks with virtual stages) where they give
	// the planned split, as the recipes that run it write it.
	if s, ok := megatron.SplitOf(stages, total, cfg.PP, vpp); ok {
		return s.Flags(), nil
	}
	return []string{"--pipeline-model-parallel-layout", layoutString(stages)}, nil
}

// firstLastFlags uses --decoder-first/last-pipeline-num-layers when the
// middle stages are equal and non-empty; nil when they cannot express it.
func firstLastFlags(stages []int) []string {
	n := len(stages)
	if n == 2 {
		if stages[0] == 0 || stages[1] == 0 {
			return nil
		}
		return []string{"--decoder-first-pipeline-num-layers", strconv.Itoa(stages[0]),
			"--decoder-last-pipeline-num-layers", strconv.Itoa(stages[1])}
	}
	mid := stages[1 : n-1]
	if !allEqual(mid) || mid[0] == 0 || stages[0] == 0 || stages[n-1] == 0 {
		return nil
	}
	var f []string
	if stages[0] != mid[0] {
		f = append(f, "--decoder-first-pipeline-num-layers", strconv.Itoa(stages[0]))
	}
	if stages[n-1] != mid[0] {
		f = append(f, "--decoder-last-pipeline-num-layers", strconv.Itoa(stages[n-1]))
	}
	return f
}

// layoutString writes Megatron's pipeline layout: E on the first stage, L
// on the last, `t*n` decoder layers, `|` between stages.
func layoutString(stages []int) string {
	parts := make([]string, len(stages))
	for i, n := range stages {
		var b strings.Builder
		if i == 0 {
			b.WriteString("E")
		}
		if n == 1 {
			b.WriteString("t")
		} else if n > 1 {
			fmt.Fprintf(&b, "t*%d", n)
		}
		if i == len(stages)-1 {
			b.WriteString("L")
		}
		parts[i] = b.String()
	}
	return strings.Join(parts, "|")
}

func allEqual(xs []int) bool {
	for _, x := range xs {
		if x != xs[0] {
			return false
		}
	}
	return true
}

// MergeMegatronArgs keeps the user's arguments exactly as given, checks
// every planned flag the user also passed against the plan (the planner
// received them as constraints, so a difference is a contradiction), and
// appends the planned flags the user's arguments do not already say.
func MergeMegatronArgs(user, planned []string) ([]string, error) {
	uf := megatron.Parse(user)
	planned = withUserPreferences(uf, planned)
	pf := megatron.Parse(planned)
	sameSplit := userSplitMatches(user, planned)
	for _, o := range uf.Occurrences() {
		if !megatronPlannedFlags[o.Name] || (sameSplit && isStageFlag(o.Name)) {
			continue
		}
		if err := userFlagAgrees(o, uf, pf); err != nil {
			return nil, err
		}
	}
	drop := map[string]bool{}
	for _, o := range pf.Occurrences() {
		if userSays(uf, o) || (sameSplit && isStageFlag(o.Name)) {
			drop[o.Name] = true
		}
	}
	return append(append([]string(nil), user...), pf.Without(drop)...), nil
}

// userSays reports whether the user's arguments already give a planned
// flag (checked to agree), in its own or Megatron's other spelling.
func userSays(uf megatron.Args, o megatron.Occurrence) bool {
	switch {
	case uf.Has(o.Name):
		return true
	case o.Name == "--num-virtual-stages-per-pipeline-rank":
		return uf.Has("--num-layers-per-virtual-pipeline-stage")
	case o.Name == "--recompute-granularity" && o.Value == string(parallel.RecomputeSelective):
		return uf.Has("--recompute-activations")
	}
	return false
}

// userSplitMatches reports whether the user gave layer split flags that
// split the layers as the planned flags do (in whichever spelling).
func userSplitMatches(user, planned []string) bool {
	uf := megatron.Parse(user)
	given := false
	for _, o := range uf.Occurrences() {
		given = given || isStageFlag(o.Name)
	}
	if !given {
		return false
	}
	us, uv, err := megatron.StageLayers(user)
	if err != nil {
		return false
	}
	n, _ := uf.Last("--num-layers")
	ps, pv, err := megatron.StageLayers(append(append([]string(nil), planned...), "--num-layers", n))
	if err != nil || uv != pv {
		return false
	}
	layers, _ := strconv.Atoi(n)
	pp, _ := megatron.Parse(planned).Int("--pipeline-model-parallel-size", 1)
	return slices.Equal(splitOrEven(us, layers, pp*uv), splitOrEven(ps, layers, pp*pv))
}

func splitOrEven(stages []int, layers, n int) []int {
	if stages != nil || n < 1 {
		return stages
	}
	even := make([]int, n)
	for i := range even {
		even[i] = layers / n
	}
	return even
}

// userFlagAgrees checks one planned flag the user gave against the plan.
// userPreferenceSwitches only trade overlap for memory or speed; a user's
// choice is kept when the plan leaves them off (the final check still
// rejects an invalid combination).
var userPreferenceSwitches = []string{"--overlap-grad-reduce", "--overlap-param-gather", "--overlap-cpu-optimizer-d2h-h2d"}

// withUserPreferences adopts what the planner does not model: the user's
// full-recompute method and layer count (the planner only decides that
// recompute is full) and the overlap switches above.
func withUserPreferences(uf megatron.Args, planned []string) []string {
	pf := megatron.Parse(planned)
	if g, _ := pf.Last("--recompute-granularity"); g == "full" {
		if ug, _ := uf.Last("--recompute-granularity"); ug == "full" {
			keep := map[string]bool{}
			var extra []string
			for _, name := range []string{"--recompute-method", "--recompute-num-layers"} {
				if v, ok := uf.Last(name); ok {
					keep[name] = true
					extra = append(extra, name, v)
				}
			}
			planned = append(pf.Without(keep), extra...)
			pf = megatron.Parse(planned)
		}
	}
	for _, sw := range userPreferenceSwitches {
		if uf.Has(sw) && !pf.Has(sw) {
			planned = append(planned, sw)
		}
	}
	return planned
}

func userFlagAgrees(o megatron.Occurrence, uf, pf megatron.Args) error {
	v, _ := uf.Last(o.Name)
	pv, planned := pf.Last(o.Name)
	switch {
	case o.Name == "--recompute-activations":
		// Megatron's alias for selective recompute: the plan says it as
		// --recompute-granularity selective.
		if g, _ := pf.Last("--recompute-granularity"); g != string(parallel.RecomputeSelective) {
			return fmt.Errorf("you passed --recompute-activations (selective recompute) but the plan recomputes %q; drop it or plan again with it fixed", cmp.Or(g, "nothing"))
		}
		return nil
	case isSwitch(o.Name) && !planned:
		if o.Name == "--sequence-parallel" {
			tp, _ := pf.Int("--tensor-model-parallel-size", 1)
			if tp == 1 {
				return nil // Megatron ignores it at TP=1
			}
		}
		return fmt.Errorf("you passed %s but the plan does not use it; drop it or plan again with it fixed", o.Name)
	case isSwitch(o.Name):
		return nil
	case !planned && o.Name == "--num-layers-per-virtual-pipeline-stage" && sameVirtualSplit(v, uf, pf):
		return nil // the plan says the same in stages per rank
	case !planned:
		if isStageFlag(o.Name) {
			return fmt.Errorf("you passed %s %s but the plan splits layers differently (%s); drop it to use the plan", o.Name, v, strings.Join(stageSummary(pf), " "))
		}
		return fmt.Errorf("you passed %s %s but the plan does not set it; drop it to use the plan", o.Name, v)
	case !sameValue(v, pv):
		return fmt.Errorf("you passed %s %s but the plan uses %s; the planner should have honoured it, so the flag contradicts another one", o.Name, v, pv)
	}
	return nil
}

// sameVirtualSplit reports whether the user's layers per virtual stage give
// the plan's virtual stages per pipeline rank.
func sameVirtualSplit(perStage string, uf, pf megatron.Args) bool {
	n, err := strconv.Atoi(perStage)
	layers, _ := uf.Int("--num-layers", 0)
	pp, _ := pf.Int("--pipeline-model-parallel-size", 1)
	v, _ := pf.Int("--num-virtual-stages-per-pipeline-rank", 0)
	return err == nil && n > 0 && v > 0 && layers == n*pp*v
}

func isStageFlag(name string) bool {
	switch name {
	case "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
		"--pipeline-model-parallel-layout", megatron.FirstStageLayersFlag, megatron.LastStageLayersFlag,
		megatron.EmbeddingInSplitFlag, megatron.LossInSplitFlag:
		return true
	}
	return false
}

func stageSummary(pf megatron.Args) []string {
	var s []string
	for _, o := range pf.Occurrences() {
		if isStageFlag(o.Name) {
			s = append(s, o.Name, o.Value)
		}
	}
	if len(s) == 0 {
		return []string{"evenly"}
	}
	return s
}

func sameValue(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && fa == fb
}

// ModelShapeArgs are the Megatron-LM flags (Megatron-DeepSpeed's spelling
// with megatronDeepSpeed) that make a script build model m, for a script
// whose own arguments do not give the shape: layers, hidden, FFN, heads,
// query groups, SwiGLU, position embedding, untied output, vocabulary.
// Flags the user's args already give are left out.
func ModelShapeArgs(m model.Model, megatronDeepSpeed bool, user []string) []string {
	var a []string
	add := func(flag string, value ...string) {
		for _, u := range user {
			if u == flag || strings.HasPrefix(u, flag+"=") {
				return
			}
		}
		a = append(append(a, flag), value...)
	}
	itoa := strconv.Itoa
	add("--num-layers", itoa(m.NumLayers))
	add("--hidden-size", itoa(m.Hidden))
	add("--ffn-hidden-size", itoa(m.FFN()))
	add("--num-attention-heads", itoa(m.Heads))
	if m.QueryGroups > 0 && m.QueryGroups != m.Heads {
		if megatronDeepSpeed {
			add("--num-key-value-heads", itoa(m.QueryGroups))
		} else {
			add("--group-query-attention")
			add("--num-query-groups", itoa(m.QueryGroups))
		}
	}
	if m.SwiGLU {
		add("--swiglu")
	}
	add("--seq-length", itoa(m.SeqLength))
	add("--max-position-embeddings", itoa(cmp.Or(m.MaxPositionEmbeddings, m.SeqLength)))
	if pe := m.PositionEmbedding; pe != "" && pe != "learned_absolute" {
		if megatronDeepSpeed && pe == "rope" {
			add("--use-rotary-position-embeddings")
		} else {
			add("--position-embedding-type", pe)
		}
	}
	if m.UntieEmbeddings {
		add("--untie-embeddings-and-output-weights")
	}
	add("--vocab-size", itoa(m.Vocab))
	if m.VocabDivisibleBy > 0 {
		add("--make-vocab-size-divisible-by", itoa(m.VocabDivisibleBy))
	}
	// Dropout changes what backward keeps (planner/memory): a model that
	// sets it is trained with it.
	for _, d := range []struct {
		flag string
		p    *float64
	}{{"--attention-dropout", m.AttentionDropout}, {"--hidden-dropout", m.HiddenDropout}} {
		if d.p != nil {
			add(d.flag, strconv.FormatFloat(*d.p, 'f', -1, 64))
		}
	}
	return a
}

// isSwitch reports whether Megatron's parser knows name as a switch.
func isSwitch(name string) bool {
	f, ok := megatron.Flags[name]
	return ok && !f.Value
}
