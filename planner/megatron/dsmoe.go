package megatron

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Megatron-DeepSpeed's mixture of experts: ParallelTransformerLayer
// (megatron/model/transformer.py, microsoft/Megatron-DeepSpeed f4157bea)
// builds DeepSpeed's MoE layer (deepspeed/moe/layer.py) from its own flags
// (megatron/arguments.py), not Megatron-Core's:
//   - --num-experts N [N ...] (nargs '+', default [1]: dense): one count, or
//     one per MoE layer (pyramid MoE);
//   - --expert-interval (default 2): get_num_experts_per_layer makes MoE the
//     layers whose 1-based number divides by it;
//   - --topk (default 1), --mlp-type standard|residual (residual: a dense
//     MLP beside the experts, PR-MoE), --moe-train-capacity-factor (default
//     1.0) with token dropping unless --disable-moe-token-dropping;
//   - --moe-expert-parallel-size (default 1) and
//     --enable-expert-tensor-parallelism (experts split over TP; otherwise
//     whole on every rank).
//
// Every expert is a ParallelMLP of --ffn-hidden-size. DeepSpeed's
// groups.py carves the expert-parallel groups out of the data-parallel
// ranks (see parallel.Constraints.DeepSpeedMoE).

const (
	// DSExpertParallelFlag is Megatron-DeepSpeed's expert-parallel size.
	DSExpertParallelFlag = "--moe-expert-parallel-size"
	// DSExpertTPFlag splits Megatron-DeepSpeed's experts over TP.
	DSExpertTPFlag = "--enable-expert-tensor-parallelism"
	// DSMoEParamGroupFlag gives the experts optimizer parameter groups of
	// their own (what DeepSpeed's ZeRO-1/2 need with MoE layers).
	DSMoEParamGroupFlag = "--create-moe-param-group"
)

// Megatron-DeepSpeed MoE flags Megatron-LM does not have: those that take
// a value and the switches (Flags registers both lists).
var (
	dsMoEValueFlags = []string{DSExpertParallelFlag, "--topk", "--expert-interval", "--mlp-type", "--moe-train-capacity-factor"}
	dsMoESwitches   = []string{DSExpertTPFlag, "--disable-moe-token-dropping", DSMoEParamGroupFlag}
)

// isDeepSpeedMoE reports whether an argument list's expert flags are read
// as Megatron-DeepSpeed's: it runs with --deepspeed (a flag Megatron-LM
// does not have) or names one of Megatron-DeepSpeed's own MoE flags.
func isDeepSpeedMoE(a Args) bool {
	if a.Has("--deepspeed") {
		return true
	}
	return slices.ContainsFunc(dsMoEValueFlags, a.Has) || slices.ContainsFunc(dsMoESwitches, a.Has)
}

// listValues returns a list flag's values as argparse's nargs='+' reads
// them: the last occurrence's value and the tokens after it up to the next
// flag ("--flag=v" takes v only).
func (a Args) listValues(name string) []string {
	var out []string
	for _, o := range a.occ {
		if o.Name != name {
			continue
		}
		out = []string{o.Value}
		if o.End == o.Start+2 {
			for _, t := range a.argv[o.End:] {
				if strings.HasPrefix(t, "-") {
					break
				}
				out = append(out, t)
			}
		}
	}
	return out
}

// dsExpertCounts are --num-experts' counts (nil when absent), each checked.
func dsExpertCounts(a Args, errs *yamlcheck.Problems) []int {
	var out []int
	for _, v := range a.listValues("--num-experts") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			errs.Add("--num-experts", "want positive integers, got %q", v)
			return nil
		}
		out = append(out, n)
	}
	return out
}

// dsMaxExperts is the largest expert count: Megatron-DeepSpeed's model is
// MoE when it is above 1.
func dsMaxExperts(counts []int) int {
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	return most
}

// moeFromDeepSpeedArgs reads Megatron-DeepSpeed's MoE flags into the
// model: a pyramid (several counts) is sized with its largest count (the
// planner has one count for every MoE layer; UnmodelledFeatures says so).
// residual reports --mlp-type residual, whose dense MLP is the model's FFN.
func moeFromDeepSpeedArgs(a Args, layers int, errs *yamlcheck.Problems) (e model.MoE, residual bool) {
	counts := dsExpertCounts(a, errs)
	interval := 2
	if a.Has("--expert-interval") {
		if interval = a.positive("--expert-interval", errs); interval == 0 {
			return model.MoE{}, false
		}
	}
	if len(counts) > 1 && layers > 0 && len(counts) != layers/interval {
		errs.Add("--num-experts", "lists %d counts; Megatron-DeepSpeed takes one, or one per MoE layer (%d layers / --expert-interval %d = %d)", len(counts), layers, interval, layers/interval)
	}
	experts := dsMaxExperts(counts)
	if experts <= 1 || (layers > 0 && layers < interval) {
		return model.MoE{}, false // Megatron-DeepSpeed's default [1]: a dense model
	}
	e = model.MoE{NumExperts: experts, TopK: 1, LayerFreq: interval, LayerPhase: interval - 1, CapacityFactor: 1}
	if a.Has("--topk") {
		e.TopK = a.positive("--topk", errs)
		if e.TopK > experts {
			errs.Add("--topk", "%d is more than the %d experts", e.TopK, experts)
		}
	}
	if v, ok := a.Last("--moe-train-capacity-factor"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			errs.Add("--moe-train-capacity-factor", "want a positive number, got %q", v)
		}
		e.CapacityFactor = f
	}
	if a.Has("--disable-moe-token-dropping") {
		e.CapacityFactor = 0 // dropless: priced at the even share
	}
	switch t := a.Value("--mlp-type"); t {
	case "", "standard":
	case "residual":
		residual = true
	default:
		errs.Add("--mlp-type", "want standard or residual (Megatron-DeepSpeed's choices), got %q", t)
	}
	return e, residual
}

// dsMoEConstraints fixes what Megatron-DeepSpeed's MoE flags pin: EP is
// --moe-expert-parallel-size (DeepSpeed's default 1 when absent: the plan
// keeps the script's size), ETP is TP with --enable-expert-tensor-parallelism
// and 1 otherwise. Megatron-LM's --expert-*-parallel-size flags do not
// exist there and are not read. The checks DeepSpeed makes on the flags
// alone are made here, naming them.
func dsMoEConstraints(a Args, c *parallel.Constraints, errs *yamlcheck.Problems) {
	var quiet yamlcheck.Problems // dsExpertCounts' complaints are modelFromArgs'
	counts := dsExpertCounts(a, &quiet)
	if dsMaxExperts(counts) <= 1 {
		c.EP, c.ETP = 0, 0
		return
	}
	c.DeepSpeedMoE, c.ExpertTP, c.EP, c.ETP = true, a.Has(DSExpertTPFlag), 1, 1
	c.MoEParamGroup = a.Has(DSMoEParamGroupFlag)
	if c.ExpertTP {
		c.ETP = 0 // = TP, whatever TP the plan takes
	}
	if a.Has(DSExpertParallelFlag) {
		c.EP = a.positive(DSExpertParallelFlag, errs)
	}
	for _, n := range counts {
		if c.EP > 0 && n%c.EP != 0 {
			errs.Add(DSExpertParallelFlag, "%d does not divide the %d experts of --num-experts: DeepSpeed's MoE layer asserts num_experts %% ep_size == 0; use a divisor of %d", c.EP, n, n)
			return
		}
	}
}

// dsPyramidNote is UnmodelledFeatures' line for a pyramid --num-experts.
func dsPyramidNote(args []string) string {
	a := Parse(args)
	if !isDeepSpeedMoE(a) {
		return ""
	}
	var quiet yamlcheck.Problems
	counts := dsExpertCounts(a, &quiet)
	for _, n := range counts {
		if n != counts[0] {
			return fmt.Sprintf("--num-experts %v is passed through, but the planner sizes every MoE layer with the largest count, %d: memory and the expert step are over-estimated for the layers with fewer", counts, dsMaxExperts(counts))
		}
	}
	return ""
}
