package run

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
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

// ChoosePlan returns the placed plan to render: planner.Choose with the
// script's arguments, the run's flags, the script's tokenizer files and the
// user's DeepSpeed config. The script's arguments get the shape flags of
// --model when the plan is for it and they lack them.
func ChoosePlan(o *Options, c *cluster.Cluster, fw parallel.Framework, planned bool) (*PlanChoice, error) {
	ds, err := userDSConfig(o, fw)
	if err != nil {
		return nil, err
	}
	sp, err := cmdutil.ParseSequenceParallel(o.SequenceParallel)
	if err != nil {
		return nil, cmdutil.InputErrorf("%v", err)
	}
	ub, err := cmdutil.TPOverlapCfgFromArgs(o.ScriptArgs)
	if err != nil {
		return nil, cmdutil.InputErrorf("script arguments: %v", err)
	}
	// A launch line's --nnodes (N or MIN:MAX) says how many hosts the job
	// runs on, so the plan uses every GPU of the hosts it keeps rather than
	// leaving some idle: an elastic job's membership is the restart loop's
	// to decide, and a fixed N is the user's. Only when no plan uses them
	// all may an elastic attempt leave some idle (idleOK).
	job := planner.Job{Framework: fw, Script: o.Script, Args: o.ScriptArgs, GlobalBatch: o.GlobalBatch,
		SequenceParallel: sp, SequenceParallelFlag: o.SequenceParallel, Vocab: tokenizer.Reader{Dir: o.WorkDir}.Vocab,
		TPOverlapCfg: ub, DS: ds, OverrideDS: o.PlanOverridesConfig, PlanIndex: o.PlanIndex, MemoryHeadroom: o.MemoryHeadroom,
		UseAllGPUs: o.UseAllGPUs || (o.NNodes != "" && !o.idleOK), DP: o.pinDP, Pins: o.Pins}
	if o.Model != "" {
		job.Model = func() (model.Model, error) { return cmdutil.LoadModel(o.Model, 0) }
	}
	choice, err := planner.Choose(c, job, planned)
	var noFit *search.NoFitError
	switch {
	case errors.As(err, &noFit):
		return nil, err // not bad input: the model does not fit (exit 3, as plan does)
	case err != nil:
		return nil, &cmdutil.InputError{Msg: err.Error(), Err: err}
	}
	if choice.Searched != nil {
		o.searched = &searchedPlans{model: choice.Model, result: choice.Searched}
	}
	ch := &PlanChoice{Plan: choice.Plan, Summary: choice.Summary, Args: o.ScriptArgs, DS: ds, Warnings: choice.Warnings}
	if m := choice.ShapeModel; m != nil {
		ch.Args = append(append([]string(nil), o.ScriptArgs...), templates.ModelShapeArgs(*m, fw == parallel.FrameworkDeepSpeed, o.ScriptArgs)...)
	}
	return ch, nil
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
	data, err := inputfile.Read(file, limits.MaxFileBytes)
	if err != nil {
		return nil, cmdutil.InputErrorf("%s %s: %v (pipette-launch plans with your config's settings, so it must be readable here)", flag, path, err)
	}
	ds, err := deepspeed.ParseUserConfig(flag, path, data)
	if err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	ds.UniversalArg = deepspeed.UniversalCheckpointArg(o.ScriptArgs)
	if ds.TrainerFillsBatch() {
		// HF Trainer fills the batch from its own arguments: the plan
		// reports what the ranks will run.
		if ds.Trainer, err = deepspeed.ReadTrainerBatch(o.ScriptArgs); err != nil {
			return nil, &cmdutil.InputError{Msg: err.Error()}
		}
	}
	return ds, nil
}

// userDSConfigFlag finds the script's DeepSpeed config
// (deepspeed.ConfigFlag): the flag, the path as given and the file it
// names here.
func userDSConfigFlag(o *Options) (flag, path, file string) {
	resolve := func(p string) string {
		if o.WorkDir != "" && p != "" && !filepath.IsAbs(p) {
			return filepath.Join(o.WorkDir, p)
		}
		return p
	}
	flag, path = deepspeed.ConfigFlag(o.ScriptArgs, func(p string) bool { _, err := os.Stat(resolve(p)); return err == nil })
	return flag, path, resolve(path)
}
