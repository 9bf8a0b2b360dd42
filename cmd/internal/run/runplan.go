package run

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/tokenizer"
)

// PlanChoice is what ChoosePlan decides: the placed plan, the one-line
// summary, the script's arguments as the ranks get them (with the shape
// flags of --model added when the script lacks them), the user's own
// DeepSpeed config and the warnings to print before the job.
type PlanChoice struct {
	Plan     *search.Plan
	Summary  string
	Args     []string
	DS       *deepspeed.UserConfig
	Warnings []string
}

// ChoosePlan returns the placed plan to render. With a cluster file
// (planned) and a known model the planner searches, with the script's own
// settings (Megatron flags, the user's DeepSpeed config) as constraints;
// plain torch jobs, and jobs on listed hosts, use torchrun's rank order
// with the parallel sizes the script's own arguments fix.
func ChoosePlan(o *Options, c *cluster.Cluster, fw parallel.Framework, planned bool) (*PlanChoice, error) {
	ch := &PlanChoice{Args: o.ScriptArgs}
	ds, err := userDSConfig(o, fw)
	if err != nil {
		return nil, err
	}
	ch.DS = ds
	megatronArgs := megatron.LooksLike(o.Script, o.ScriptArgs)
	vocab := tokenizer.Reader{Dir: o.WorkDir}
	m, fixed, found, err := megatron.ModelFromArgsVocab(o.ScriptArgs, vocab.Vocab)
	if found && err != nil && fw != parallel.FrameworkTorch {
		return nil, cmdutil.InputErrorf("%v", err)
	}
	if megatronArgs && fw != parallel.FrameworkTorch {
		ch.Warnings = append(ch.Warnings, megatron.UnmodelledFeatures(o.ScriptArgs)...)
	}
	micro, global, err := megatron.BatchArgs(o.ScriptArgs)
	if err != nil && fw != parallel.FrameworkTorch {
		return nil, cmdutil.InputErrorf("%v", err)
	}
	if o.GlobalBatch > 0 {
		if global > 0 && global != o.GlobalBatch {
			return nil, cmdutil.InputErrorf("--global-batch-size %d contradicts the script's --global-batch-size %d: give one", o.GlobalBatch, global)
		}
		global = o.GlobalBatch
	}
	if !found {
		fixed = parallel.Constraints{ZeroStage: -1}
		if !megatronArgs && fw == parallel.FrameworkDeepSpeed {
			// A plain DeepSpeed script only does data parallelism (+ ZeRO).
			fixed.TP, fixed.PP, fixed.CP = 1, 1, 1
		}
	}
	if err := applySequenceParallel(o.SequenceParallel, &fixed, found); err != nil {
		return nil, err
	}
	if megatronArgs && fw != parallel.FrameworkTorch {
		// The user's own layer split stands: rendered as given without
		// planning, a constraint on the search with it.
		stages, vpp, err := megatron.StageLayers(o.ScriptArgs)
		if err != nil {
			return nil, cmdutil.InputErrorf("script arguments: %v", err)
		}
		if stages != nil || vpp > 1 {
			fixed.VPP, fixed.StageLayers = max(fixed.VPP, vpp), stages
		}
	}
	if fw == parallel.FrameworkTorch || !planned {
		ch.Plan, ch.Summary, err = torchrunOrderPlan(c, fw, fixed, micro, global, ds)
		return ch, err
	}
	if !found || m.NumLayers == 0 {
		if o.Model == "" {
			if fw == parallel.FrameworkMegatron {
				return nil, cmdutil.InputErrorf("no model shape: the script's arguments have no --num-layers/--hidden-size/--num-attention-heads/--seq-length; add them or pass --model (presets: %s)", strings.Join(model.PresetNames(), ", "))
			}
			ch.Plan, ch.Summary, err = torchrunOrderPlan(c, fw, fixed, micro, global, ds)
			return ch, err
		}
		m, err = cmdutil.LoadModel(o.Model, 0)
		if err != nil {
			return nil, &cmdutil.InputError{Msg: err.Error()}
		}
		if t := megatron.Tokenizer(o.ScriptArgs); t.Type != "" {
			// Megatron sizes the embedding by the script's tokenizer, whatever
			// the model file says.
			if n, _, err := vocab.Vocab(t); err == nil && n > 0 {
				m.Vocab, found = n, true
			}
		}
		if megatronArgs || fw == parallel.FrameworkMegatron {
			// The job must train the model that was planned.
			ch.Args = append(append([]string(nil), o.ScriptArgs...), templates.ModelShapeArgs(m, fw == parallel.FrameworkDeepSpeed, o.ScriptArgs)...)
		}
	}
	if err := planner.CheckFixedSizes(m, fixed, c.TotalGPUs()); err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	p, n, err := searchPlan(o, c, m, fw, fixed, micro, global, ds)
	if err != nil {
		return nil, err
	}
	ch.Plan = p
	ch.Summary = planSummary(p, o.PlanIndex, n) + vocabNote(m, p.TP, vocab, o.ScriptArgs, found)
	return ch, nil
}

// searchPlan runs the search with the user's DeepSpeed config as
// constraints (unless --plan-overrides-config). When no plan keeps the
// config, the error names the keys the best plan without them changes.
func searchPlan(o *Options, c *cluster.Cluster, m model.Model, fw parallel.Framework, fixed parallel.Constraints, micro, global int, ds *deepspeed.UserConfig) (*search.Plan, int, error) {
	free := fixed
	keep := ds != nil && !o.PlanOverridesConfig
	if ds != nil {
		var err error
		if global, err = ds.GlobalBatch(global); err != nil {
			return nil, 0, &cmdutil.InputError{Msg: err.Error()}
		}
		if keep {
			if err := ds.Constrain(&fixed, micro, global); err != nil {
				return nil, 0, &cmdutil.InputError{Msg: err.Error()}
			}
		}
	}
	if global == 0 {
		return nil, 0, cmdutil.InputErrorf("no global batch size: pass --global-batch-size (or the script's own --global-batch-size)")
	}
	search := func(fx parallel.Constraints, keepConfig bool) ([]search.Plan, error) {
		res, err := search.Search(c, m, search.Options{Framework: fw, GlobalBatch: global, Fixed: fx, TopK: max(10, o.PlanIndex), Seed: 1})
		var noFit *search.NoFitError
		if errors.As(err, &noFit) {
			// Not bad input: the model does not fit this cluster (exit 3, as
			// `plan` does), and the message says what would help.
			return nil, fmt.Errorf("plan %s for %s: %w", m.Name, fw, noFit)
		}
		if err != nil {
			return nil, cmdutil.InputErrorf("plan %s for %s: %v", m.Name, fw, err)
		}
		var keep []search.Plan
		for _, p := range res.Plans {
			if !keepConfig || len(ds.PlanChanges(p.Config)) == 0 {
				keep = append(keep, p)
			}
		}
		kept := *res
		kept.Plans = keep
		o.searched = &searchedPlans{model: m, result: &kept}
		return keep, nil
	}
	plans, err := search(fixed, keep)
	if keep && len(plans) == 0 {
		free.MicroBatch = max(free.MicroBatch, micro)
		alt, altErr := search(free, false)
		var best *parallel.Config
		if altErr == nil && len(alt) > 0 {
			best = &alt[0].Config
		} else if err == nil {
			err = altErr
		}
		return nil, 0, &cmdutil.InputError{Msg: ds.Conflict(best, err).Error()}
	}
	if err != nil {
		return nil, 0, err
	}
	if o.PlanIndex > len(plans) {
		return nil, 0, cmdutil.InputErrorf("--plan %d: only %d plans were found", o.PlanIndex, len(plans))
	}
	p := plans[o.PlanIndex-1]
	p.Framework = fw
	return &p, len(plans), nil
}

// torchrunOrderPlan is planner.TorchrunOrder with the batch sizes, ZeRO
// stage and offload of the user's DeepSpeed config, as DeepSpeed derives
// them for torchrun's data-parallel size.
func torchrunOrderPlan(c *cluster.Cluster, fw parallel.Framework, fixed parallel.Constraints, micro, global int, ds *deepspeed.UserConfig) (*search.Plan, string, error) {
	offloadParams := false
	if ds != nil {
		dp, err := planner.TorchrunDP(c, fixed)
		if err != nil {
			return nil, "", &cmdutil.InputError{Msg: err.Error()}
		}
		if err := ds.Unplanned(&fixed, &micro, &global, dp); err != nil {
			return nil, "", &cmdutil.InputError{Msg: err.Error()}
		}
		offloadParams = ds.OffloadsParams()
	}
	p, summary, err := planner.TorchrunOrder(c, fw, fixed, micro, global, offloadParams)
	if err != nil {
		return nil, "", &cmdutil.InputError{Msg: err.Error()}
	}
	return p, summary, nil
}

// vocabNote says where the planned vocabulary came from and how Megatron
// pads it, for the plan's summary line.
func vocabNote(m model.Model, tp int, r tokenizer.Reader, args []string, fromArgs bool) string {
	src := "the model"
	if fromArgs {
		src = "--vocab-size"
		if t := megatron.Tokenizer(args); t.Type != "" {
			src = t.Type
			if _, from, err := r.Vocab(t); err == nil && from != "" {
				src += " " + from
			}
		}
	}
	return fmt.Sprintf("; vocabulary %d (%s), padded to %d", m.Vocab, src, m.PaddedVocab(tp))
}

// userDSConfig reads the config the user's own --deepspeed_config names:
// its settings are the user's (see deepspeed.UserConfig).
func userDSConfig(o *Options, fw parallel.Framework) (*deepspeed.UserConfig, error) {
	if fw != parallel.FrameworkDeepSpeed {
		return nil, nil
	}
	flag, path, file := userDSConfigFlag(o)
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, cmdutil.InputErrorf("%s %s: %v (pipette-launch plans with your config's settings, so it must be readable here)", flag, path, err)
	}
	ds, err := deepspeed.ParseUserConfig(flag, path, data)
	if err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	return ds, nil
}

// userDSConfigFlag finds the script's --deepspeed_config: the flag, the
// path as given and the file it names here.
func userDSConfigFlag(o *Options) (flag, path, file string) {
	for i, a := range o.ScriptArgs {
		for _, f := range []string{"--deepspeed_config", "--deepscale_config"} {
			if a == f && i+1 < len(o.ScriptArgs) {
				flag, path = f, o.ScriptArgs[i+1]
			} else if v, ok := strings.CutPrefix(a, f+"="); ok {
				flag, path = f, v
			}
		}
	}
	file = path
	if o.WorkDir != "" && path != "" && !filepath.IsAbs(file) {
		file = filepath.Join(o.WorkDir, file)
	}
	return flag, path, file
}

// planSummary is the one line printed before the job.
func planSummary(p *search.Plan, idx, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %d of %d (%s): TP %d PP %d DP %d CP %d", idx, n, p.Framework, p.TP, p.PP, p.DP, max(p.CP, 1))
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
	return b.String()
}

// writeOutputDir writes <host>.sh per host plus the job's files. The
// scripts are the owner's only (0700): they carry the ranks' environment,
// secrets included. The files go into the directory itself, which the
// scripts name by its absolute path; it never takes the place of the
// user's own DeepSpeed config.
func writeOutputDir(o *Options, j *job.Job, summary string) error {
	if err := os.MkdirAll(o.OutputDir, 0o700); err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	write := func(name string, data []byte, mode os.FileMode) error {
		path := o.OutputDir + string(os.PathSeparator) + name
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil { // pipette_site/
			return fmt.Errorf("--output-dir: %w", err)
		}
		if err := os.WriteFile(path, data, mode); err != nil {
			return fmt.Errorf("--output-dir: %w", err)
		}
		// WriteFile keeps the mode of a file that was there.
		if err := os.Chmod(path, mode); err != nil {
			return fmt.Errorf("--output-dir: %w", err)
		}
		fmt.Fprintf(o.IO.Out, "wrote %s\n", path)
		return nil
	}
	if flag, path, file := userDSConfigFlag(o); path != "" {
		mine, _ := os.Stat(file)
		for _, f := range j.Files {
			if st, err := os.Stat(filepath.Join(o.OutputDir, f.Path)); err == nil && mine != nil && os.SameFile(st, mine) {
				return cmdutil.InputErrorf("--output-dir %s: writing %s there would overwrite your %s %s: choose another directory", o.OutputDir, f.Path, flag, path)
			}
		}
	}
	labels := job.HostLabels(j.Hosts)
	for i, h := range j.Hosts {
		if strings.ContainsAny(h.Name, "/\x00") || h.Name == "." || h.Name == ".." {
			return fmt.Errorf("--output-dir: host name %q cannot be a file name", h.Name)
		}
		// name:port becomes name_port: a colon is awkward in file names.
		if err := write(strings.ReplaceAll(labels[i], ":", "_")+".sh", []byte(h.Script), 0o700); err != nil {
			return err
		}
	}
	for _, f := range j.Files {
		if err := write(f.Path, f.Content, os.FileMode(f.Mode)); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.IO.Out, "# %s\n", summary)
	if o.probeNote != "" {
		fmt.Fprintf(o.IO.Out, "# %s\n", o.probeNote)
	}
	fmt.Fprintf(o.IO.Out, "# run each host's script on its host, in the work directory")
	if len(j.Files) > 0 {
		fmt.Fprintf(o.IO.Out, "; the ranks read the job's files from %s: keep this directory at that path on every host (a shared filesystem) or copy it there", j.FilesDir)
	}
	fmt.Fprintf(o.IO.Out, "\n")
	return nil
}

// applySequenceParallel applies run's --sequence-parallel to what the
// script's flags fixed: auto keeps the script's choice (from its flags, or
// the planner's when the script has no Megatron flags); on/off set it, and
// contradicting the script is bad input.
func applySequenceParallel(v string, fixed *parallel.Constraints, fromScript bool) error {
	want, err := cmdutil.ParseSequenceParallel(v)
	if err != nil {
		return cmdutil.InputErrorf("%v", err)
	}
	if want == nil {
		return nil
	}
	if fromScript && fixed.SequenceParallel != nil && *fixed.SequenceParallel != *want {
		return cmdutil.InputErrorf("--sequence-parallel %s contradicts the script's arguments (they %s --sequence-parallel): change one", v,
			map[bool]string{true: "pass", false: "do not pass"}[*fixed.SequenceParallel])
	}
	fixed.SequenceParallel = want
	return nil
}
