package search

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// ConstraintError says which of the user's fixed constraints rules out
// every configuration, and why, in terms of `plan`'s flags (--tp 3, ...).
type ConstraintError struct {
	// Flag is the constraint's flag without dashes: tp, pp, dp, cp, vpp,
	// micro-batch-size, zero-stage, distributed-optimizer, offload.
	Flag    string
	Message string
}

func (e *ConstraintError) Error() string { return e.Message }

// checkConstraintsApply refuses constraints the framework has no notion
// of: ignoring them would plan something other than what was asked.
func checkConstraintsApply(f parallel.Framework, fx parallel.Constraints) error {
	bad := func(flag, format string, a ...any) error {
		return &ConstraintError{Flag: flag, Message: fmt.Sprintf(format, a...)}
	}
	if f == parallel.FrameworkDeepSpeed {
		switch {
		case fx.DistributedOptimizer != nil:
			return bad("distributed-optimizer", "--distributed-optimizer is Megatron-LM's; DeepSpeed shards optimizer state with ZeRO: use --zero-stage 1, 2 or 3")
		case fx.CP > 1 && !fx.Ulysses:
			return bad("cp", "--cp %d: DeepSpeed plans have no context parallelism (Megatron-LM only); use --cp 1 or --framework megatron", fx.CP)
		case fx.VPP > 1:
			return bad("vpp", "--vpp %d: DeepSpeed's pipeline engine has no interleaved schedule (Megatron-LM only); use --vpp 1 or --framework megatron", fx.VPP)
		}
		return nil
	}
	if fx.Ulysses && fx.CP > 1 {
		return bad("ds-sequence-parallel-size", "--ds-sequence-parallel-size %d is DeepSpeed-Ulysses: Megatron-DeepSpeed runs it only with --deepspeed (plan with --framework deepspeed)", fx.CP)
	}
	if fx.ZeroStage > 0 { // 0 is also Constraints' zero value
		return bad("zero-stage", "--zero-stage %d is DeepSpeed's; Megatron-LM has no ZeRO stages: use --distributed-optimizer (ZeRO-1-like sharding) or --framework deepspeed", fx.ZeroStage)
	}
	return nil
}

// explainNoConfig is called when enumerate found nothing: it finds the
// constraint that alone rules everything out and says why, with the values
// that would work; failing that, it names the combination.
func explainNoConfig(c *cluster.Cluster, m model.Model, o Options) error {
	free := o
	free.Fixed = parallel.Constraints{ZeroStage: -1, Recompute: o.Fixed.Recompute, NoOffload: o.Fixed.NoOffload, ForceOffload: o.Fixed.ForceOffload,
		// What kind of MoE the script builds is no flag to drop.
		DeepSpeedMoE: o.Fixed.DeepSpeedMoE, ExpertTP: o.Fixed.ExpertTP, MoEParamGroup: o.Fixed.MoEParamGroup}
	all := enumerate(c, m, free, 0)
	set := fixedFlags(o.Fixed)
	for _, f := range set {
		one := free
		f.apply(&one.Fixed, o.Fixed)
		if len(enumerate(c, m, one, 0)) > 0 {
			continue
		}
		return &ConstraintError{Flag: f.name, Message: fmt.Sprintf("--%s %s: %s%s", f.name, f.value(o.Fixed), f.why(c, m, o), allowedValues(f, all))}
	}
	world := c.TotalGPUs()
	if len(set) == 0 {
		return fmt.Errorf("no parallel configuration of %s is valid on %d GPUs with global batch %d: the attention heads (%d) must divide by a TP size that divides every host's GPUs, and the global batch by micro-batch x data-parallel size", m.Name, world, o.GlobalBatch, m.Heads)
	}
	var names []string
	for _, f := range set {
		names = append(names, "--"+f.name+" "+f.value(o.Fixed))
	}
	return &ConstraintError{Flag: set[0].name, Message: fmt.Sprintf("%s: each is possible alone, but together no configuration of %s on %d GPUs with global batch %d satisfies them; drop one (TP x PP x CP x DP must be %d, and the global batch must divide by micro-batch x DP)",
		strings.Join(names, " "), m.Name, world, o.GlobalBatch, world)}
}

// fixedFlag is one constraint flag: how to copy it, print it and explain
// why it alone fails, and which value a config has for it.
type fixedFlag struct {
	name   string
	apply  func(dst *parallel.Constraints, src parallel.Constraints)
	value  func(parallel.Constraints) string
	of     func(parallel.Config) string // the config's value, for "values that work"
	why    func(c *cluster.Cluster, m model.Model, o Options) string
	values string // how to name the values that work
}

func fixedFlags(fx parallel.Constraints) []fixedFlag {
	var out []fixedFlag
	for _, f := range allFlags {
		if f.value(fx) != "" {
			out = append(out, f)
		}
	}
	return out
}

func intFlag(v int) string {
	if v <= 0 {
		return ""
	}
	return strconv.Itoa(v)
}

var allFlags = []fixedFlag{
	{name: "tp", values: "TP sizes that divide them and fit a host",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.TP = s.TP },
		value: func(f parallel.Constraints) string { return intFlag(f.TP) },
		of:    func(c parallel.Config) string { return strconv.Itoa(c.TP) },
		why:   whyTP},
	{name: "cp", values: "CP sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.CP = s.CP },
		value: func(f parallel.Constraints) string { return intFlag(f.CP) },
		of:    func(c parallel.Config) string { return strconv.Itoa(c.CP) },
		why:   whyCP},
	{name: "pp", values: "PP sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.PP = s.PP },
		value: func(f parallel.Constraints) string { return intFlag(f.PP) },
		of:    func(c parallel.Config) string { return strconv.Itoa(c.PP) },
		why:   whyPP},
	{name: "dp", values: "DP sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.DP = s.DP },
		value: func(f parallel.Constraints) string { return intFlag(f.DP) },
		of:    func(c parallel.Config) string { return strconv.Itoa(c.DP) },
		why:   whyDP},
	{name: "vpp", values: "virtual stages that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.VPP = s.VPP },
		value: func(f parallel.Constraints) string { return intFlag(f.VPP) },
		of:    func(c parallel.Config) string { return strconv.Itoa(max(c.VPP, 1)) },
		why:   whyVPP},
	{name: "micro-batch-size", values: "micro-batch sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.MicroBatch = s.MicroBatch },
		value: func(f parallel.Constraints) string { return intFlag(f.MicroBatch) },
		of:    func(c parallel.Config) string { return strconv.Itoa(c.MicroBatch) },
		why:   whyMicroBatch},
	{name: "ep", values: "EP sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.EP = s.EP },
		value: func(f parallel.Constraints) string { return intFlag(f.EP) },
		of:    func(c parallel.Config) string { ep, _ := c.ExpertParallel(); return strconv.Itoa(ep) },
		why:   whyEP},
	{name: "etp", values: "ETP sizes that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.ETP = s.ETP },
		value: func(f parallel.Constraints) string { return intFlag(f.ETP) },
		of:    func(c parallel.Config) string { _, etp := c.ExpertParallel(); return strconv.Itoa(etp) },
		why:   whyEP},
	{name: "zero-stage", values: "ZeRO stages that work",
		apply: func(d *parallel.Constraints, s parallel.Constraints) { d.ZeroStage = s.ZeroStage },
		value: func(f parallel.Constraints) string {
			if f.ZeroStage < 0 {
				return ""
			}
			return strconv.Itoa(f.ZeroStage)
		},
		of: func(c parallel.Config) string { return strconv.Itoa(c.ZeroStage) },
		why: func(_ *cluster.Cluster, m model.Model, o Options) string {
			if o.Fixed.DeepSpeedMoE && !o.Fixed.MoEParamGroup && o.Fixed.ZeroStage > 0 && m.IsMoE() {
				return "DeepSpeed's ZeRO optimizer needs the expert parameters in a group of their own (stage_1_and_2.py asserts \"None of the param groups are marked as MoE\"): add Megatron-DeepSpeed's --create-moe-param-group, or use ZeRO stage 0"
			}
			return "no configuration with this ZeRO stage is valid"
		}},
}

func allowedValues(f fixedFlag, all []parallel.Config) string {
	var vals []int
	for _, c := range all {
		if v, err := strconv.Atoi(f.of(c)); err == nil && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return "; no value works: nothing is valid on this cluster even with it left free"
	}
	slices.Sort(vals)
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = strconv.Itoa(v)
	}
	return "; " + f.values + ": " + strings.Join(s, ", ")
}

// hostGPUs is the GPU count every host shares (the gcd), which a TP
// group must divide to stay inside a host.
func hostGPUs(c *cluster.Cluster) int {
	g := 0
	for _, h := range c.Hosts {
		g = gcd(g, h.GPUs)
	}
	return g
}

func whyTP(c *cluster.Cluster, m model.Model, o Options) string {
	tp := o.Fixed.TP
	switch {
	case m.Heads%tp != 0:
		return fmt.Sprintf("attention heads %d are not divisible by %d", m.Heads, tp)
	case m.Groups()%tp != 0 && tp%m.Groups() != 0:
		return fmt.Sprintf("query groups %d and %d: neither divides the other", m.Groups(), tp)
	case hostGPUs(c)%tp != 0:
		return fmt.Sprintf("a TP group must stay inside one host or span whole hosts, and %d neither divides nor is a multiple of the %d GPUs every host has", tp, hostGPUs(c))
	}
	return fmt.Sprintf("no configuration with TP %d is valid on %d GPUs with global batch %d", tp, c.TotalGPUs(), o.GlobalBatch)
}

func whyCP(c *cluster.Cluster, m model.Model, o Options) string {
	cp := o.Fixed.CP
	switch {
	case m.SeqLength%(2*cp) != 0:
		return fmt.Sprintf("sequence length %d is not divisible by 2 x CP = %d (Megatron splits each sequence into 2 x CP chunks)", m.SeqLength, 2*cp)
	case c.TotalGPUs()%cp != 0:
		return fmt.Sprintf("%d does not divide the %d GPUs", cp, c.TotalGPUs())
	}
	return fmt.Sprintf("no configuration with CP %d is valid on %d GPUs with global batch %d", cp, c.TotalGPUs(), o.GlobalBatch)
}

func whyPP(c *cluster.Cluster, m model.Model, o Options) string {
	pp, world := o.Fixed.PP, c.TotalGPUs()
	switch {
	case pp > m.NumLayers:
		return fmt.Sprintf("more pipeline stages than the model's %d layers", m.NumLayers)
	case world%pp != 0:
		return fmt.Sprintf("%d does not divide the %d GPUs (TP x PP x CP x DP must equal them)", pp, world)
	}
	return fmt.Sprintf("no configuration with PP %d is valid on %d GPUs with global batch %d", pp, world, o.GlobalBatch)
}

func whyDP(c *cluster.Cluster, m model.Model, o Options) string {
	dp, world := o.Fixed.DP, c.TotalGPUs()
	switch {
	case world%dp != 0:
		return fmt.Sprintf("%d does not divide the %d GPUs (DP = GPUs / (TP x PP x CP))", dp, world)
	case o.GlobalBatch%dp != 0:
		return fmt.Sprintf("the global batch %d is not divisible by %d", o.GlobalBatch, dp)
	}
	return fmt.Sprintf("no configuration with DP %d is valid on %d GPUs with global batch %d", dp, world, o.GlobalBatch)
}

func whyVPP(c *cluster.Cluster, m model.Model, o Options) string {
	vpp, pp := o.Fixed.VPP, o.Fixed.PP
	switch {
	case pp == 1:
		return "the interleaved schedule needs --pp > 1"
	case pp > 1 && m.NumLayers%(pp*vpp) != 0:
		return fmt.Sprintf("the %d layers do not divide into PP x VPP = %d virtual stages", m.NumLayers, pp*vpp)
	}
	return fmt.Sprintf("no pipeline size splits the %d layers into %d virtual stages per rank with micro-batches divisible by PP (global batch %d)", m.NumLayers, vpp, o.GlobalBatch)
}

func whyMicroBatch(c *cluster.Cluster, m model.Model, o Options) string {
	mb := o.Fixed.MicroBatch
	switch {
	case o.GlobalBatch%mb != 0:
		return fmt.Sprintf("the global batch %d is not divisible by %d", o.GlobalBatch, mb)
	}
	return fmt.Sprintf("no configuration with micro-batch %d is valid on %d GPUs with global batch %d", mb, c.TotalGPUs(), o.GlobalBatch)
}

// whyEP explains a pinned expert parallel (or expert tensor parallel) size
// that fails Megatron-Core's rules.
func whyEP(c *cluster.Cluster, m model.Model, o Options) string {
	ep := max(o.Fixed.EP, 1)
	if o.Fixed.DeepSpeedMoE && m.IsMoE() && m.NumExperts%ep == 0 {
		return whyDeepSpeedEP(c, o, ep)
	}
	switch {
	case !m.IsMoE():
		return fmt.Sprintf("%s has no experts (expert parallelism needs an MoE model)", m.Name)
	case m.NumExperts%ep != 0:
		return fmt.Sprintf("the %d experts are not divisible by EP %d", m.NumExperts, ep)
	case o.Fixed.ETP > 0 && m.ExpertFFN()%o.Fixed.ETP != 0:
		return fmt.Sprintf("the expert FFN size %d is not divisible by ETP %d", m.ExpertFFN(), o.Fixed.ETP)
	}
	return fmt.Sprintf("no configuration puts EP x ETP ranks inside the TP x CP x DP ranks of a pipeline stage on %d GPUs (and EP > 1 with TP > 1 needs sequence parallelism)", c.TotalGPUs())
}

// whyDeepSpeedEP explains a Megatron-DeepSpeed expert-parallel size no
// configuration takes: DeepSpeed's groups.py builds the EP groups inside
// the data-parallel ranks (with TP when the experts are whole).
func whyDeepSpeedEP(c *cluster.Cluster, o Options, ep int) string {
	tp, pp := max(o.Fixed.TP, 1), max(o.Fixed.PP, 1)
	if o.Fixed.ExpertTP {
		return fmt.Sprintf("DeepSpeed builds its expert-parallel groups inside the data-parallel group (utils/groups.py asserts dp_world_size %% ep_size == 0), and no configuration on %d GPUs with global batch %d has a data-parallel size divisible by %d (with TP %d, PP %d: DP %d)",
			c.TotalGPUs(), o.GlobalBatch, ep, tp, pp, c.TotalGPUs()/(tp*pp))
	}
	return fmt.Sprintf("DeepSpeed builds its expert-parallel groups from consecutive ranks of a pipeline stage (utils/groups.py asserts (world / PP) %% ep_size == 0), and no configuration on %d GPUs with global batch %d has TP x DP divisible by %d (with PP %d: %d ranks per stage)",
		c.TotalGPUs(), o.GlobalBatch, ep, pp, c.TotalGPUs()/pp)
}
