package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/templates"
)

// choosePlan returns the placed plan to render and a one-line summary.
// With a cluster file (planned) and a known model the planner searches;
// plain torch jobs, and jobs on listed hosts, use torchrun's rank order
// with the parallel sizes the script's own arguments fix.
func choosePlan(o *RunOptions, c *planner.Cluster, fw planner.Framework, planned bool) (*planner.Plan, string, error) {
	megatronArgs := templates.LooksLikeMegatron(o.Script, o.ScriptArgs)
	m, fixed, found, err := planner.ModelFromMegatronArgs(o.ScriptArgs)
	if found && err != nil && fw != planner.FrameworkTorch {
		return nil, "", inputErrorf("%v", err)
	}
	micro, global, err := planner.MegatronBatchArgs(o.ScriptArgs)
	if err != nil && fw != planner.FrameworkTorch {
		return nil, "", inputErrorf("%v", err)
	}
	if o.GlobalBatch > 0 {
		if global > 0 && global != o.GlobalBatch {
			return nil, "", inputErrorf("--global-batch-size %d contradicts the script's --global-batch-size %d: give one", o.GlobalBatch, global)
		}
		global = o.GlobalBatch
	}
	if !found {
		fixed = planner.Constraints{ZeroStage: -1}
		if !megatronArgs && fw == planner.FrameworkDeepSpeed {
			// A plain DeepSpeed script only does data parallelism (+ ZeRO).
			fixed.TP, fixed.PP, fixed.CP = 1, 1, 1
		}
	}
	if err := applySequenceParallel(o.SequenceParallel, &fixed, found); err != nil {
		return nil, "", err
	}
	if fw == planner.FrameworkTorch || !planned {
		if megatronArgs && fw != planner.FrameworkTorch {
			// Without planning the user's own layer split stands.
			stages, vpp, err := templates.UserStageLayers(o.ScriptArgs)
			if err != nil {
				return nil, "", inputErrorf("script arguments: %v", err)
			}
			fixed.VPP = max(fixed.VPP, vpp)
			return torchrunOrderPlan(c, fw, fixed, micro, global, stages)
		}
		return torchrunOrderPlan(c, fw, fixed, micro, global, nil)
	}
	if !found || m.NumLayers == 0 {
		if o.Model == "" {
			if fw == planner.FrameworkMegatron {
				return nil, "", inputErrorf("no model shape: the script's arguments have no --num-layers/--hidden-size/--num-attention-heads/--seq-length; add them or pass --model (presets: %s)", strings.Join(planner.PresetNames(), ", "))
			}
			return torchrunOrderPlan(c, fw, fixed, micro, global, nil)
		}
		m, err = loadModel(o.Model, 0)
		if err != nil {
			return nil, "", &inputError{err.Error()}
		}
	}
	if err := checkFixedSizes(m, fixed, c.TotalGPUs()); err != nil {
		return nil, "", err
	}
	if global == 0 {
		return nil, "", inputErrorf("no global batch size: pass --global-batch-size (or the script's own --global-batch-size)")
	}
	res, err := planner.Search(c, m, planner.SearchOptions{Framework: fw, GlobalBatch: global, Fixed: fixed, TopK: max(10, o.PlanIndex), Seed: 1})
	var noFit *planner.NoFitError
	if errors.As(err, &noFit) {
		// Not bad input: the model does not fit this cluster (exit 3, as
		// `plan` does), and the message says what would help.
		return nil, "", fmt.Errorf("plan %s for %s: %w", m.Name, fw, noFit)
	}
	if err != nil {
		return nil, "", inputErrorf("plan %s for %s: %v", m.Name, fw, err)
	}
	if o.PlanIndex > len(res.Plans) {
		return nil, "", inputErrorf("--plan %d: only %d plans were found", o.PlanIndex, len(res.Plans))
	}
	o.searched = &searchedPlans{model: m, result: res}
	p := res.Plans[o.PlanIndex-1]
	p.Framework = fw
	return &p, planSummary(&p, o.PlanIndex, len(res.Plans)), nil
}

// checkFixedSizes names the user's own parallel flag when it cannot work,
// before the search reports that nothing is valid.
func checkFixedSizes(m planner.Model, f planner.Constraints, gpus int) error {
	tp, pp, cp := max(f.TP, 1), max(f.PP, 1), max(f.CP, 1)
	switch {
	case m.Heads%tp != 0:
		return inputErrorf("--tensor-model-parallel-size %d does not divide --num-attention-heads %d: Megatron needs heads %% TP == 0", tp, m.Heads)
	case m.Groups()%tp != 0 && tp%m.Groups() != 0:
		return inputErrorf("--tensor-model-parallel-size %d and --num-query-groups %d: one must divide the other", tp, m.Groups())
	case tp*pp*cp > gpus:
		return inputErrorf("TP %d x PP %d x CP %d needs %d GPUs, the cluster has %d", tp, pp, cp, tp*pp*cp, gpus)
	case f.PP > 0 && m.NumLayers < f.PP:
		return inputErrorf("--pipeline-model-parallel-size %d is more than the %d layers", f.PP, m.NumLayers)
	}
	return nil
}

// torchrunOrderPlan places ranks host by host, local rank = GPU, as torchrun
// and DeepSpeed do, with TP/PP/CP as the script fixes them (default 1).
func torchrunOrderPlan(c *planner.Cluster, fw planner.Framework, fixed planner.Constraints, micro, global int, stages []int) (*planner.Plan, string, error) {
	world := c.TotalGPUs()
	tp, pp, cp := max(fixed.TP, 1), max(fixed.PP, 1), max(fixed.CP, 1)
	if world%(tp*pp*cp) != 0 {
		return nil, "", inputErrorf("%d ranks do not divide by the script's TP %d x PP %d x CP %d", world, tp, pp, cp)
	}
	dp := world / (tp * pp * cp)
	micro = max(micro, 1)
	if global == 0 {
		global = micro * dp
	}
	cfg := planner.Config{TP: tp, PP: pp, DP: dp, CP: cp, VPP: max(fixed.VPP, 1), MicroBatch: micro, GlobalBatch: global,
		NumMicroBatches: global / (micro * dp), ZeroStage: max(fixed.ZeroStage, 0), Recompute: fixed.Recompute, StageLayers: stages}
	if fixed.SequenceParallel != nil {
		cfg.SequenceParallel = *fixed.SequenceParallel
	}
	if fixed.DistributedOptimizer != nil {
		cfg.DistributedOptimizer = *fixed.DistributedOptimizer
	}
	if fixed.ForceOffload {
		cfg.Offload.OptimizerFraction = 1
	}
	p := &planner.Plan{Framework: fw, Config: cfg}
	for hi, h := range c.Hosts {
		for l := range h.GPUs {
			p.Placement = append(p.Placement, planner.RankPlacement{Rank: len(p.Placement), Host: h.Name, HostIndex: hi, LocalRank: l, GPU: l})
		}
	}
	return p, fmt.Sprintf("torchrun rank order (no planning): %d ranks on %d host(s), TP %d PP %d CP %d DP %d", world, len(c.Hosts), tp, pp, cp, dp), nil
}

// planSummary is the one line printed before the job.
func planSummary(p *planner.Plan, idx, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %d of %d (%s): TP %d PP %d DP %d CP %d", idx, n, p.Framework, p.TP, p.PP, p.DP, max(p.CP, 1))
	if p.VPP > 1 {
		fmt.Fprintf(&b, " VPP %d", p.VPP)
	}
	fmt.Fprintf(&b, ", micro-batch %d, global batch %d", p.MicroBatch, p.GlobalBatch)
	if len(p.StageLayers) > 0 {
		fmt.Fprintf(&b, ", layers per stage %v", p.StageLayers)
	}
	if p.Recompute != "" && p.Recompute != planner.RecomputeNone {
		fmt.Fprintf(&b, ", recompute %s", p.Recompute)
	}
	if p.Framework == planner.FrameworkDeepSpeed {
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
	return b.String()
}

// writeOutputDir writes <host>.sh per host plus the job's files.
func writeOutputDir(o *RunOptions, job *templates.Job, summary string) error {
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	write := func(name string, data []byte, mode os.FileMode) error {
		path := o.OutputDir + string(os.PathSeparator) + name
		if err := os.WriteFile(path, data, mode); err != nil {
			return fmt.Errorf("--output-dir: %w", err)
		}
		fmt.Fprintf(o.IO.Out, "wrote %s\n", path)
		return nil
	}
	labels := templates.HostLabels(job.Hosts)
	for i, h := range job.Hosts {
		if strings.ContainsAny(h.Name, "/\x00") || h.Name == "." || h.Name == ".." {
			return fmt.Errorf("--output-dir: host name %q cannot be a file name", h.Name)
		}
		// name:port becomes name_port: a colon is awkward in file names.
		if err := write(strings.ReplaceAll(labels[i], ":", "_")+".sh", []byte(h.Script), 0o755); err != nil {
			return err
		}
	}
	for _, f := range job.Files {
		if err := write(f.Path, f.Content, os.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.IO.Out, "# %s\n# copy the files to the work directory of every host and run each host's script there\n", summary)
	return nil
}

// applySequenceParallel applies run's --sequence-parallel to what the
// script's flags fixed: auto keeps the script's choice (from its flags, or
// the planner's when the script has no Megatron flags); on/off set it, and
// contradicting the script is bad input.
func applySequenceParallel(v string, fixed *planner.Constraints, fromScript bool) error {
	want, err := parseSequenceParallel(v)
	if err != nil {
		return inputErrorf("%v", err)
	}
	if want == nil {
		return nil
	}
	if fromScript && fixed.SequenceParallel != nil && *fixed.SequenceParallel != *want {
		return inputErrorf("--sequence-parallel %s contradicts the script's arguments (they %s --sequence-parallel): change one", v,
			map[bool]string{true: "pass", false: "do not pass"}[*fixed.SequenceParallel])
	}
	fixed.SequenceParallel = want
	return nil
}
