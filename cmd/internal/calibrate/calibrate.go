package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/plan"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/launcher/probe/measure"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/calibration"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
)

// Options are the inputs of `pipette-launch calibrate`.
type Options struct {
	IO *cmdutil.IOStreams
	// ClusterFile is read and rewritten with the new calibration section.
	ClusterFile string
	Logs        []string
	LogDir      string
	// PlanFile is `plan --json` output; PlanIndex picks its plan.
	PlanFile  string
	PlanIndex int
	// Without a plan file: the model and the pinned sizes of what ran.
	Model       string
	GlobalBatch int
	SeqLength   int
	Framework   string
	Fixed       parallel.Constraints
	NCCLMode    string
	Skip        int
	DryRun      bool
	Now         func() time.Time
}

func NewCmd(io *cmdutil.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "calibrate",
		Usage:     "fit the cluster file's calibration to a run's measured iteration times",
		ArgsUsage: "[LOG...]",
		Description: `Reads iteration times from a job's logs (Megatron-LM and Megatron-DeepSpeed
"elapsed time per iteration (ms)" lines, DeepSpeed's ThroughputTimer "CurrSamplesPerSec="
lines; LOG files and/or every *.log in --log-dir), takes their median after --skip warm-up
iterations, and compares it with the plan's predicted iteration time on --cluster. The run
is added to the file's calibration section with the prediction's sensitivity to every
factor (compute, and each link class: intra_host ISLAND, inter_host ISLAND, inter_host A,B),
then all recorded runs are refitted (least squares on relative error, factors are time
multipliers, each with the number of runs it shows in). plan and run then use the factors.

What ran: --plan FILE (the output of plan --json; --plan-index picks the plan), or the
` + run.RunPlanFile + ` that run wrote into its --log-dir (so after a planned run,
calibrate --cluster FILE --log-dir DIR needs nothing else), or --model and
--global-batch-size with the sizes that ran pinned (--tp, --pp, --dp, --micro-batch-size,
...; unpinned ones are searched).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cluster", Usage: "cluster YAML `FILE` to calibrate (rewritten in place)", Required: true},
			&cli.StringFlag{Name: "log-dir", Usage: "a run's --log-dir: every *.log in it is read"},
			&cli.StringFlag{Name: "plan", Usage: "plan --json output `FILE` describing what ran"},
			&cli.IntFlag{Name: "plan-index", Usage: "which plan of --plan ran (0 = the first)"},
			&cli.StringFlag{Name: "model", Usage: "model preset or YAML (without --plan)"},
			&cli.IntFlag{Name: "global-batch-size", Usage: "sequences per iteration (without --plan; DeepSpeed rates need it)"},
			&cli.IntFlag{Name: "seq-length", Usage: "override the model's sequence length"},
			&cli.StringFlag{Name: "framework", Value: "megatron", Usage: "megatron or deepspeed (without --plan)"},
			&cli.IntFlag{Name: "tp", Usage: "tensor parallel size that ran"},
			&cli.IntFlag{Name: "pp", Usage: "pipeline parallel size that ran"},
			&cli.IntFlag{Name: "dp", Usage: "data parallel size that ran"},
			&cli.IntFlag{Name: "cp", Usage: "context parallel size that ran"},
			&cli.IntFlag{Name: "vpp", Usage: "virtual stages per pipeline rank that ran"},
			&cli.IntFlag{Name: "micro-batch-size", Usage: "micro-batch size that ran"},
			&cli.StringFlag{Name: "recompute", Usage: "recomputation that ran: none, selective or full"},
			&cli.IntFlag{Name: "zero-stage", Value: -1, Usage: "DeepSpeed ZeRO stage that ran"},
			&cli.BoolFlag{Name: "distributed-optimizer", Usage: "Megatron's distributed optimizer ran (=false: it did not)"},
			&cli.StringFlag{Name: "sequence-parallel", Value: "auto", Usage: "sequence parallelism that ran: on, off or auto (searched)"},
			&cli.BoolFlag{Name: "no-offload", Usage: "no CPU offload ran"},
			&cli.BoolFlag{Name: "offload", Usage: "CPU offload ran"},
			&cli.StringFlag{Name: "precision", Usage: "precision that ran: bf16, fp16, fp8 or fp32 (default: the plan's, else bf16)"},
			&cli.StringFlag{Name: "nccl-mode", Value: "auto", Usage: "as run --nccl-mode rendered the job"},
			&cli.IntFlag{Name: "skip", Value: 1, Usage: "leading iterations of each log to drop as warm-up"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the fit, do not rewrite --cluster"},
		},
		Action: func(c *cli.Context) error {
			logs, err := cmdutil.InterspersedArgs(c)
			if err != nil {
				return cmdutil.UsageError("%v", err)
			}
			opts := &Options{
				IO: io, ClusterFile: c.String("cluster"), Logs: logs, LogDir: c.String("log-dir"),
				PlanFile: c.String("plan"), PlanIndex: c.Int("plan-index"), Model: c.String("model"),
				GlobalBatch: c.Int("global-batch-size"), SeqLength: c.Int("seq-length"), Framework: c.String("framework"),
				NCCLMode: c.String("nccl-mode"), Skip: c.Int("skip"), DryRun: c.Bool("dry-run"),
				Fixed: parallel.Constraints{TP: c.Int("tp"), PP: c.Int("pp"), DP: c.Int("dp"), CP: c.Int("cp"), VPP: c.Int("vpp"),
					MicroBatch: c.Int("micro-batch-size"), Recompute: parallel.Recompute(c.String("recompute")), ZeroStage: c.Int("zero-stage"),
					NoOffload: c.Bool("no-offload"), ForceOffload: c.Bool("offload"), Precision: gpu.Precision(c.String("precision"))},
			}
			// The flags form pins what ran, "off" included: a flag left
			// unset is searched, which would price another configuration.
			if c.IsSet("distributed-optimizer") {
				v := c.Bool("distributed-optimizer")
				opts.Fixed.DistributedOptimizer = &v
			}
			if opts.Fixed.SequenceParallel, err = cmdutil.ParseSequenceParallel(c.String("sequence-parallel")); err != nil {
				return cmdutil.UsageError("%v", err)
			}
			return Run(opts)
		},
	}
}

// calibrateTarget is what ran: the model and search options that pin it.
type calibrateTarget struct {
	model model.Model
	so    search.Options
	label string
}

func Run(opts *Options) error {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	mode, err := fabric.ParseMode(opts.NCCLMode)
	if err != nil {
		return cmdutil.UsageError("%v", err)
	}
	data, err := inputfile.Read(opts.ClusterFile, limits.MaxFileBytes)
	if err != nil {
		return cmdutil.UsageError("calibrate: --cluster: %v", err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		return cmdutil.UsageError("calibrate: cluster %s: %v", opts.ClusterFile, err)
	}
	target, err := calibrateTargetFrom(opts)
	if err != nil {
		return cmdutil.UsageError("calibrate: %v", err)
	}
	obs, sources, n, err := observedIteration(opts, target.so.GlobalBatch)
	if err != nil {
		return cmdutil.UsageError("calibrate: %v", err)
	}
	predict := func(c *cluster.Cluster) (float64, error) {
		res, err := search.Search(c, target.model, target.so)
		if err != nil {
			return 0, err
		}
		return res.Plans[0].Predicted.IterationSeconds, nil
	}
	t, err := runTransport(f, mode, target)
	if err != nil {
		return cli.Exit(fmt.Sprintf("calibrate: price %s on %s: %v", target.label, opts.ClusterFile, err), 1)
	}
	run, err := cluster.Linearize(f, t, predict)
	if err != nil {
		return cli.Exit(fmt.Sprintf("calibrate: price %s on %s: %v", target.label, opts.ClusterFile, err), 1)
	}
	run.Source, run.At, run.Plan = strings.Join(sources, ","), now().UTC().Truncate(time.Second), target.label
	run.Iterations, run.ObservedS = n, obs
	var runs []calib.Run
	if f.Calibration != nil {
		runs = append(runs, f.Calibration.Runs...)
	}
	cal := calibration.Fit(append(runs, run), run.At)
	g := *f
	g.Calibration = cal
	c, err := g.ResolveFor(t)
	if err != nil {
		return cli.Exit(fmt.Sprintf("calibrate: %v", err), 1)
	}
	after, err := predict(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("calibrate: %v", err), 1)
	}
	printCalibration(opts.IO.Out, target.label, run, after, cal)
	if opts.DryRun {
		fmt.Fprintln(opts.IO.Out, "--dry-run: "+opts.ClusterFile+" not changed")
		return nil
	}
	if err := writeCalibration(opts.ClusterFile, data, cal); err != nil {
		return cli.Exit(fmt.Sprintf("calibrate: %v", err), 1)
	}
	fmt.Fprintf(opts.IO.Out, "wrote the calibration into %s\n", opts.ClusterFile)
	return nil
}

// runTransport is the transport the run was priced on by `plan` and `run`
// (planner.OnFabric: under --nccl-mode auto a Megatron job across islands
// keeps RDMA inside islands unless its groups rule it out, then sockets
// everywhere), so the factors are fitted to the prediction `plan` makes,
// not to another network's.
func runTransport(f *cluster.File, mode fabric.Mode, target calibrateTarget) (fabric.Transport, error) {
	var used fabric.Transport
	resolve := func(t fabric.Transport) (*cluster.Cluster, error) {
		used = t
		return f.ResolveFor(t)
	}
	best := func(c *cluster.Cluster) (struct{}, *search.Plan, error) {
		res, err := search.Search(c, target.model, target.so)
		if err != nil {
			return struct{}{}, nil, err
		}
		return struct{}{}, &res.Plans[0], nil
	}
	fallback := func(c *cluster.Cluster, p *search.Plan) string {
		return templates.IslandsFallback(c, p, templates.Options{})
	}
	_, _, err := planner.OnFabric(mode.TransportFor(target.so.Framework), resolve, best, fallback, nil)
	return used, err
}

// planJSON is the part of `plan --json` calibrate reads.
type planJSON struct {
	Model struct {
		Shape model.Model `json:"shape"`
	} `json:"model"`
	Plans []search.Plan `json:"plans"`
}

func calibrateTargetFrom(opts *Options) (calibrateTarget, error) {
	if opts.PlanFile != "" {
		return targetFromPlanFile(opts.PlanFile, opts.PlanIndex)
	}
	if opts.LogDir != "" && opts.Fixed.TP == 0 && opts.Fixed.PP == 0 {
		if p := filepath.Join(opts.LogDir, run.RunPlanFile); fileExists(p) {
			return targetFromPlanFile(p, 0)
		}
	}
	if opts.Fixed.TP <= 0 || opts.Fixed.PP <= 0 {
		return calibrateTarget{}, fmt.Errorf("say what ran: --plan FILE (plan --json output), or --model, --global-batch-size and at least --tp and --pp")
	}
	m, err := cmdutil.LoadModel(opts.Model, opts.SeqLength)
	if err != nil {
		return calibrateTarget{}, err
	}
	so, err := plan.SearchOptions(&plan.Options{GlobalBatch: opts.GlobalBatch, Framework: opts.Framework, Top: 1, Seed: 1, Fixed: opts.Fixed})
	if err != nil {
		return calibrateTarget{}, err
	}
	fx := opts.Fixed
	label := fmt.Sprintf("%s %s TP%d PP%d DP%s mb%s gbs%d distopt=%s sp=%s offload=%s", so.Framework, m.Name, fx.TP, fx.PP, orAny(fx.DP),
		orAny(fx.MicroBatch), so.GlobalBatch, pinnedBool(fx.DistributedOptimizer), pinnedBool(fx.SequenceParallel), pinnedOffload(fx))
	return calibrateTarget{model: m, so: so, label: label}, nil
}

// pinnedBool says a pinned switch's state, or that the search picks it.
func pinnedBool(b *bool) string {
	switch {
	case b == nil:
		return "searched"
	case *b:
		return "on"
	}
	return "off"
}

func pinnedOffload(fx parallel.Constraints) string {
	switch {
	case fx.NoOffload:
		return "off"
	case fx.ForceOffload:
		return "on"
	}
	return "searched"
}

func orAny(v int) string {
	if v <= 0 {
		return "*"
	}
	return fmt.Sprint(v)
}

// targetFromPlanFile pins every dimension of the chosen plan.
func targetFromPlanFile(path string, index int) (calibrateTarget, error) {
	b, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return calibrateTarget{}, fmt.Errorf("--plan: %w", err)
	}
	var pj planJSON
	if err := json.Unmarshal(b, &pj); err != nil {
		return calibrateTarget{}, fmt.Errorf("--plan %s: not plan --json output: %w", path, err)
	}
	if pj.Model.Shape.NumLayers == 0 {
		return calibrateTarget{}, fmt.Errorf("--plan %s: no model.shape", path)
	}
	if index < 0 || index >= len(pj.Plans) {
		return calibrateTarget{}, fmt.Errorf("--plan-index %d: %s has %d plans", index, path, len(pj.Plans))
	}
	p := pj.Plans[index]
	so := search.Options{Framework: p.Framework, GlobalBatch: p.GlobalBatch, Fixed: pinnedBy(p), TopK: 1, Seed: 1}
	label := fmt.Sprintf("%s %s TP%d PP%d DP%d CP%d VPP%d mb%d gbs%d recompute=%s", p.Framework, pj.Model.Shape.Name,
		p.TP, p.PP, p.DP, max(p.CP, 1), max(p.VPP, 1), p.MicroBatch, p.GlobalBatch, p.Recompute)
	return calibrateTarget{model: pj.Model.Shape, so: so, label: label}, nil
}

// pinnedBy is the constraints that pin every dimension of plan p, in the
// terms its framework has: the distributed optimizer is Megatron-LM's
// (search refuses it on a DeepSpeed plan), ZeRO stages DeepSpeed's; a torch
// plan is priced as the search prices it, as Megatron-LM's layout.
func pinnedBy(p search.Plan) parallel.Constraints {
	sp := p.SequenceParallel
	fx := parallel.Constraints{TP: p.TP, PP: p.PP, DP: p.DP, CP: max(p.CP, 1), VPP: max(p.VPP, 1), MicroBatch: p.MicroBatch,
		EP: p.EP, ETP: p.ETP, Ulysses: p.Ulysses, Recompute: p.Recompute, ZeroStage: -1, SequenceParallel: &sp,
		Precision: p.Precision, LowPrecisionDP: p.LowPrecisionDP, TPCommOverlap: p.TPCommOverlap, TPOverlapCfg: p.TPOverlapCfg,
		StageLayers: p.StageLayers}
	if p.Offload == (parallel.Offload{}) {
		fx.NoOffload = true
	} else {
		fx.ForceOffload = true
	}
	if p.Framework == parallel.FrameworkDeepSpeed {
		fx.ZeroStage = p.ZeroStage
	} else {
		dist := p.DistributedOptimizer
		fx.DistributedOptimizer = &dist
	}
	return fx
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// observedIteration is the median iteration time over every log that has
// iteration lines (with --log-dir, only the rank that logs them has).
func observedIteration(opts *Options, globalBatch int) (median float64, sources []string, n int, err error) {
	files := append([]string(nil), opts.Logs...)
	if opts.LogDir != "" {
		found, err := filepath.Glob(filepath.Join(opts.LogDir, "*.log"))
		if err != nil || len(found) == 0 {
			return 0, nil, 0, fmt.Errorf("--log-dir %s: no *.log files", opts.LogDir)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	if len(files) == 0 {
		return 0, nil, 0, fmt.Errorf("give the run's logs (LOG... or --log-dir DIR)")
	}
	var all []float64
	var firstErr error
	for _, name := range files {
		fh, err := inputfile.Open(name)
		if err != nil {
			return 0, nil, 0, err
		}
		l, err := measure.ParseIterationLog(fh, globalBatch, opts.Skip)
		fh.Close()
		if err != nil && !errors.Is(err, measure.ErrNoIterationTimes) {
			// A bad value is wrong wherever it is: skipping the log would
			// calibrate from the others without saying so.
			return 0, nil, 0, fmt.Errorf("%s: %w", name, err)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		all = append(all, l.Seconds...)
		sources = append(sources, name)
	}
	if len(all) == 0 {
		return 0, nil, 0, firstErr
	}
	return measure.IterationLog{Seconds: all}.MedianSeconds(), sources, len(all), nil
}

func printCalibration(w io.Writer, label string, run calib.Run, after float64, cal *calib.Calibration) {
	pct := func(pred float64) float64 { return 100 * (pred - run.ObservedS) / run.ObservedS }
	fmt.Fprintf(w, "run: %s\n", label)
	fmt.Fprintf(w, "observed: %.4f s per iteration (median of %d iterations from %s)\n", run.ObservedS, run.Iterations, run.Source)
	fmt.Fprintf(w, "predicted before: %.4f s (error %+.1f%%)\n", run.PredictedS, pct(run.PredictedS))
	fmt.Fprintf(w, "predicted after:  %.4f s (error %+.1f%%), fitted to %d runs\n", after, pct(after), len(cal.Runs))
	if len(cal.Runs) < 3 && math.Abs(pct(after)) >= 3 {
		// Why the fitted run is not matched: calibration.Fit weighs a
		// cluster off the model against one configuration the model
		// misprices, and few runs cannot tell them apart.
		fmt.Fprintf(w, "note: with %d runs only part of the correction is applied (one configuration alone may be mispriced by ~8%%); record runs of other configurations to apply the rest\n", len(cal.Runs))
	}
	if cv := cal.CrossValidation; cv != nil && cv.Kept < 1 {
		// Why the factors are nearer 1 than the runs alone suggest:
		// calibration.Fit predicts each run from the others and keeps
		// only the share of the correction that does so.
		fmt.Fprintf(w, "note: each run predicted from the others (%d folds) supports %.0f%% of the fitted correction, and only that share is applied: the runs disagree, as when the model misprices one configuration; runs of other configurations decide it\n",
			cv.Folds, 100*cv.Kept)
	}
	printDisagreeing(w, cal)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FACTOR\tTIME x\tRUNS\tTHIS RUN'S SHARE")
	share := func(k string) string {
		if s, ok := run.PartsS[k]; ok && run.PredictedS > 0 {
			return fmt.Sprintf("%.0f%%", 100*s/run.PredictedS)
		}
		return "-"
	}
	fmt.Fprintf(tw, "%s\t%.3f\t%d\t%s\n", calib.ComputeFactorKey, cal.Compute.Factor, cal.Compute.Observations, share(calib.ComputeFactorKey))
	for _, l := range cal.Links {
		fmt.Fprintf(tw, "%s\t%.3f\t%d\t%s\n", l.Link, l.Factor, l.Observations, share(l.Link))
	}
	tw.Flush()
}

// printDisagreeing names the runs that disagree with the others beyond
// their noise (calibration.Fit), each with its observed time against the
// uncalibrated model, so the user can tell a mispriced configuration (or a
// run that went wrong) from a cluster off the model.
func printDisagreeing(w io.Writer, cal *calib.Calibration) {
	cv := cal.CrossValidation
	if cv == nil || len(cv.Disagreeing) == 0 {
		return
	}
	fmt.Fprintf(w, "note: the runs disagree beyond their noise (a run's scatter about the model is ~8%%); these are still off after calibrating:\n")
	for _, i := range cv.Disagreeing {
		if i < 0 || i >= len(cal.Runs) {
			continue
		}
		r := cal.Runs[i]
		label := r.Plan
		if label == "" {
			label = r.Source
		}
		fmt.Fprintf(w, "  run %d (%s, %s): observed %.4f s, %+.0f%% against the prediction when it was recorded\n",
			i+1, label, r.At.Format("2006-01-02 15:04"), r.ObservedS, 100*(r.ObservedS/r.PredictedS-1))
	}
	fmt.Fprintf(w, "  rerun them, or record runs of other configurations: only what the runs predict of each other is applied\n")
}

// writeCalibration replaces (or adds) the calibration key of the file's
// YAML document, keeping everything else, comments included, and writes
// it atomically.
func writeCalibration(path string, data []byte, cal *calib.Calibration) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a YAML mapping", path)
	}
	root := doc.Content[0]
	var val yaml.Node
	if err := val.Encode(cal); err != nil {
		return err
	}
	replaced := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "calibration" {
			root.Content[i+1] = &val
			replaced = true
		}
	}
	if !replaced {
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "calibration"}, &val)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if _, err := cluster.Parse(buf.Bytes()); err != nil {
		return fmt.Errorf("the calibrated file would not parse (not written): %w", err)
	}
	// Through a symlink to the file it names, keeping that file's mode: a
	// cluster file kept 0600 (it may name hosts and users) stays so.
	return atomicfile.WriteThrough(path, buf.Bytes(), 0o644)
}
