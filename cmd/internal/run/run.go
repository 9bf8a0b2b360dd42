package run

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/examples"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Options are the inputs of `pipette-launch run` (and of the bare
// torchrun-style `pipette-launch script.py ...`).
type Options struct {
	IO *cmdutil.IOStreams
	// Preflight runs the collective test before the job; PreflightOnly
	// (pipette-launch preflight) runs only the test.
	Preflight, PreflightOnly bool
	PreflightTimeout         time.Duration
	PreflightMinShare        float64
	// Env is the environment pipette-launch was started in (KEY=VALUE).
	Env []string

	// Line is what the launch line says in its launchers' terms (read by
	// cmd/internal/launchline): hosts, ranks, rendezvous, restarts, script.
	launchline.Line
	RunID, Python string
	ClusterFile   string
	Framework     string
	PlanIndex     int
	Model         string
	GlobalBatch   int
	// MemoryHeadroom is --memory-headroom (search.Options.MemoryHeadroom).
	MemoryHeadroom float64
	// UseAllGPUs is --use-all-gpus (search.Options.UseAllGPUs).
	UseAllGPUs bool
	DryRun     bool
	// JSON, with DryRun, prints the job as one JSON object.
	JSON      bool
	OutputDir string
	// Force lets --output-dir replace files already in the directory.
	Force    bool
	NCCLMode string
	// Launcher is --launcher: auto, ssh, slurm or k8s.
	Launcher string
	// K8s are the --launcher k8s settings.
	K8s K8sOptions
	// SequenceParallel is on, off or auto ("": auto = the script's own
	// --sequence-parallel decides).
	SequenceParallel string
	WorkDir          string
	NoCheckScript    bool
	// KeepFiles (--keep-files) leaves the job's files directory on every
	// host when the job ends (launch.Options.KeepFiles).
	KeepFiles bool
	// PlanOverridesConfig lets the plan change the user's DeepSpeed
	// config (printed as a diff) instead of keeping it as constraints.
	PlanOverridesConfig bool
	// Pins are --recompute, --no-offload and --distributed-optimizer: what
	// the plan keeps that a Megatron script's arguments cannot pin off.
	Pins planner.Pins
	// devices are the filtered hosts' slots as CUDA_VISIBLE_DEVICES.
	devices []string
	// EnvFlags are --env KEY=VALUE as given; EnvFile is --env-file.
	EnvFlags []string
	EnvFile  string

	// Launching: SSH connection, output filters and stopping.
	SSH                         remote.SSHOptions
	Fanout                      int
	QuietRanks                  []int
	StopGrace, HeartbeatTimeout time.Duration
	// RejoinInterval is --rejoin-interval (elastic.Options.RejoinInterval);
	// ProgressTimeout is --progress-timeout (0: off): a job that printed
	// iteration lines and then no new step for this long is stopped as
	// hung (elastic.WatchProgress), elastic or not.
	RejoinInterval, ProgressTimeout time.Duration

	// aheadDone, when set, is called once an elastic job's plans after each
	// single loss are made (tests wait for it before reporting a loss).
	aheadDone func()
	// Report draws the plans; searched is what ChoosePlan's search found.
	Report   cmdutil.ReportOptions
	searched *searchedPlans
	// slurm is the allocation the job starts in when --launcher picks Slurm.
	slurm *remote.Slurm
	// pool holds the launch probe's connections for the launch to reuse.
	pool *remote.Pool
	// local: the job runs on this machine without SSH (runlocal.go).
	local bool
	// keep, when set, are the only hosts an elastic attempt plans on
	// (runElastic); --nnodes' MIN is the loop's to check then.
	keep map[string]bool
	// pinDP, when set, is the data-parallel size an elastic restart keeps
	// (planOn: its DeepSpeed checkpoint loads only at that size).
	pinDP int
	// idleOK lets an elastic attempt's plan leave hosts idle when no plan
	// uses every GPU of its hosts (planValidWorld).
	idleOK bool
	// filesDir is the job's own directory for its files (jobFilesDir).
	filesDir string
	// Reprobe (--reprobe) runs the launch probe for a dry run or
	// --output-dir; ProbeMaxAge bounds the age of a cached one they show;
	// probeNote says which they used.
	Reprobe     bool
	ProbeMaxAge time.Duration
	probeNote   string

	// The steps that reach hosts or the clock, nil for the real ones:
	// tests set them (NewCmd's adjust) instead of package variables, so
	// they need not run one at a time. Launch starts and supervises the
	// job (launchJob); LaunchPreflight starts the preflight job, its
	// output to out (launchPreflight); ProbeLaunch is the pre-launch
	// probe (probeLaunch); NewJobID names one launch (realJobID).
	Launch          func(ctx context.Context, job *job.Job, opts *Options) error
	LaunchPreflight func(ctx context.Context, job *job.Job, opts *Options, out io.Writer) error
	ProbeLaunch     func(ctx context.Context, targets []remote.HostTarget, rank0 int, python string, opts *Options) (*launchprobe.Result, *remote.Pool, error)
	NewJobID        func(name string) string
}

func (o *Options) launch() func(context.Context, *job.Job, *Options) error {
	if o.Launch != nil {
		return o.Launch
	}
	return launchJob
}

func (o *Options) launchPreflight() func(context.Context, *job.Job, *Options, io.Writer) error {
	if o.LaunchPreflight != nil {
		return o.LaunchPreflight
	}
	return launchPreflight
}

func (o *Options) probeLaunch() func(context.Context, []remote.HostTarget, int, string, *Options) (*launchprobe.Result, *remote.Pool, error) {
	if o.ProbeLaunch != nil {
		return o.ProbeLaunch
	}
	return probeLaunch
}

func (o *Options) newJobID() func(string) string {
	if o.NewJobID != nil {
		return o.NewJobID
	}
	return realJobID
}

// launchJob starts a rendered job on its hosts and supervises it with the
// launcher package: Options.Launch when nil.
func launchJob(ctx context.Context, job *job.Job, opts *Options) error {
	lo := launchOptions(opts)
	if opts.ProgressTimeout <= 0 {
		return launch.Launch(ctx, *job, lo)
	}
	// --progress-timeout: a hang is a failure as a rank's is, so
	// --max-restarts restarts the job after it too (ft_launcher's rule;
	// launch's own loop restarts only after a rank failed, and a stop of
	// the whole launch ends it).
	for {
		hung, err := watchedForHang(ctx, opts, job, func(ctx context.Context, steps *elastic.StepWatch) error {
			// Each attempt (launch's own restarts too) watched afresh.
			lo.Out, lo.Started = steps, func(int) { steps.Begin(job) }
			return launch.Launch(ctx, *job, lo)
		})
		var jf *launch.JobFailure
		if !hung || !errors.As(err, &jf) || jf.Restarts >= opts.MaxRestarts || ctx.Err() != nil {
			return err
		}
		lo.Restart = jf.Restarts + 1
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: job %s: restarting the whole job after the hang (restart %d of %d)\n", job.Name, lo.Restart, opts.MaxRestarts)
	}
}

// watchedForHang runs a launch under --progress-timeout: run gets the
// context to launch with and the step watch to give the launch as its
// output (Begin it as each attempt starts); a job that printed iteration
// lines and then no new step for that long is stopped, and said to be
// (hung).
func watchedForHang(ctx context.Context, opts *Options, j *job.Job, run func(context.Context, *elastic.StepWatch) error) (hung bool, err error) {
	steps := elastic.NewStepWatch(opts.IO.Out)
	actx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go elastic.WatchProgress(actx, stop, steps, opts.ProgressTimeout)
	err = run(actx, steps)
	var h *elastic.Hang
	if errors.As(elastic.StoppedWhy(ctx, err, context.Cause(actx)), &h) {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: job %s stopped as hung: %s\n", j.Name, h)
		return true, err
	}
	return false, err
}

// launchOptions are the launch's settings from the run's.
func launchOptions(opts *Options) launch.Options {
	return launch.Options{
		Slurm:            opts.slurm,
		Local:            opts.local,
		SSH:              opts.SSH,
		Fanout:           opts.Fanout,
		Pool:             opts.pool,
		Out:              opts.IO.Out,
		LogDir:           opts.LogDir,
		LocalRanksFilter: opts.LocalRanksFilter,
		QuietRanks:       opts.QuietRanks,
		Grace:            opts.StopGrace,
		HeartbeatTimeout: opts.HeartbeatTimeout,
		MaxRestarts:      opts.MaxRestarts,
		KeepFiles:        opts.KeepFiles,
	}
}

// NewCmd is `pipette-launch run`. adjust, when not nil, changes the
// options read from the command line before the run uses them (tests set
// the Launch, ProbeLaunch and NewJobID steps there).
func NewCmd(io *cmdutil.IOStreams, adjust func(*Options)) *cli.Command {
	return &cli.Command{
		Name:        "run",
		Usage:       "plan, render and start a training job (torchrun's replacement)",
		ArgsUsage:   "script.py [script args...]",
		Description: launchline.IgnoredFlagsHelp(),
		Flags:       Flags(),
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch run: %s (see pipette-launch run --help)", cmdutil.DidYouMean(err, c.Command.Flags)), 2)
		},
		Action: func(c *cli.Context) error {
			return runAction(c, io, adjust)
		},
	}
}

func runAction(c *cli.Context, io *cmdutil.IOStreams, adjust func(*Options)) error {
	opts, err := OptionsFromCLI(c, io, os.Environ())
	if err != nil {
		return cmdutil.ExitFor(err)
	}
	if adjust != nil {
		adjust(opts)
	}
	// SIGINT/SIGTERM/SIGHUP/SIGQUIT and --signals-to-handle's stop every
	// rank on every host before exiting, each rank getting the signal, as
	// torchrun's agent forwards them to its workers.
	ctx := c.Context
	if sigs := stopSignals(opts.Line.StopSignals); len(sigs) > 0 { // none would mean every signal
		var stop context.CancelFunc
		ctx, stop = launch.NotifyContext(ctx, sigs...)
		defer stop()
	}
	return cmdutil.ExitFor(Run(ctx, opts))
}

// stopSignals are the signals that stop the job (torchrun's agent forwards
// INT, TERM, HUP and QUIT to its workers) and the line's extra ones
// (--signals-to-handle), leaving out those this process was started
// ignoring: under nohup (SIGHUP) or in a script's background job (SIGINT)
// the user asked for them not to stop it, and catching them would undo
// that (torchrun's "SIGHUP death under nohup").
func stopSignals(extra []os.Signal) []os.Signal {
	var sigs []os.Signal
	for _, s := range append(slices.Clone(launchline.DefaultStopSignals), extra...) {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	return sigs
}

// Run plans (or takes torchrun's order), renders and then prints,
// writes or launches the job.
func Run(ctx context.Context, opts *Options) error {
	if err := CheckOptions(opts); err != nil {
		return err
	}
	if err := defaultHosts(opts); err != nil {
		return err
	}
	for i, f := range opts.Ignored {
		why := "pipette-launch starts every host itself with a static rendezvous"
		if i < len(opts.IgnoredWhy) {
			why = opts.IgnoredWhy[i]
		}
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s is ignored: %s\n", f, why)
	}
	if w := cmdutil.SlurmStepWarning(cmdutil.EnvLookup(opts.Env)); w != "" {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
	}
	fw := ChooseFramework(opts)
	mode, err := fabric.ParseMode(opts.NCCLMode)
	if err != nil {
		return &cmdutil.InputError{Msg: err.Error()}
	}
	elasticMin := 0 // an elastic job's MIN: a DeepSpeed elasticity section may leave hosts out
	if nodes, _ := launchline.ParseNNodes(opts.NNodes); nodes.Elastic() {
		elasticMin = nodes.Min
	}
	cluster, ch, planned, err := planValidWorld(opts, fw, mode, elasticMin)
	if err != nil {
		return err
	}
	summary := ch.Summary
	if err := writeRunReport(opts, cluster); err != nil {
		return err
	}
	explicit, sources, err := explicitEnv(opts)
	if err != nil {
		return err
	}
	for _, s := range sources {
		names := make([]string, len(s.vars))
		for i, v := range s.vars {
			names[i] = v.Name
		}
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: environment from %s: %s\n", s.name, strings.Join(names, " "))
	}
	renderOptionsFor := func(ch *PlanChoice, facts *launchFacts) templates.Options {
		return templates.Options{
			Name:           opts.RunID,
			Role:           opts.Role,
			Script:         opts.Script,
			Args:           ch.Args,
			Python:         facts.python,
			Rendezvous:     facts.rendezvous,
			NodeRankPinned: slices.Contains(opts.Ignored, "--node-rank"),
			NoPython:       opts.NoPython,
			Module:         opts.Module,
			MasterAddr:     opts.MasterAddr,
			MasterPort:     opts.MasterPort,
			MaxRestarts:    opts.MaxRestarts,
			NCCLMode:       mode,
			WorkDir:        opts.WorkDir,
			FilesDir:       jobFilesDir(opts),
			LogDir:         opts.LogDir,
			StopGrace:      job.GraceSeconds(opts.StopGrace),
			Env:            opts.Env,
			ExplicitEnv:    explicit,
			HostDevices:    opts.devices,
			NoLocalRank:    opts.NoLocalRank,
			TorchrunStyle:  opts.Style == launchline.StyleTorchrun,
			LocalRankArg:   opts.Style == launchline.StyleDeepSpeed || opts.Style == launchline.StyleTorchLaunch,
			DSInScript:     dsInScript(opts, ch.DS, planned),
			DSUser:         ch.DS,
			DSPassThrough:  !planned,
			Unplanned:      !planned,
			DSOverride:     opts.PlanOverridesConfig,
		}
	}
	renderOptions := func(facts *launchFacts) templates.Options { return renderOptionsFor(ch, facts) }
	// renderFor renders a choice on its cluster (an elastic restart's on
	// the hosts left); render the first one.
	renderWith := func(ch *PlanChoice, c *plannedCluster, o templates.Options) (*job.Job, error) {
		job, err := templates.Render(ch.Plan, c, o)
		if err != nil {
			return nil, &cmdutil.InputError{Msg: fmt.Sprintf("render %s launch: %v", fw, err)}
		}
		job.Warnings = append(slices.Clone(ch.Warnings), job.Warnings...)
		return job, nil
	}
	renderFor := func(ch *PlanChoice, c *plannedCluster, facts *launchFacts) (*job.Job, error) {
		return renderWith(ch, c, renderOptionsFor(ch, facts))
	}
	// ranksFor renders without the host scripts (the dry run's look at
	// each loss reads only the ranks).
	ranksFor := func(ch *PlanChoice, c *plannedCluster, facts *launchFacts) (*job.Job, error) {
		o := renderOptionsFor(ch, facts)
		o.NoScripts = true
		return renderWith(ch, c, o)
	}
	render := func(facts *launchFacts) (*job.Job, error) { return renderFor(ch, cluster, facts) }
	// Rendered once before connecting anywhere, so bad input fails first.
	facts := &launchFacts{python: opts.Python}
	job, err := render(facts)
	if err != nil {
		return err
	}
	if onKubernetes(opts) {
		return runKubernetes(ctx, opts, cluster, job, summary, elasticRun{fw: fw, mode: mode, render: renderFor})
	}
	if opts.local = runsHere(opts, jobTargets(job)); !opts.local {
		if opts.slurm, err = slurmFor(opts, job); err != nil {
			return err
		}
	}
	if err := checkRankFilters(opts, job); err != nil {
		return err
	}
	if opts.DryRun || opts.OutputDir != "" {
		if job, err = withCachedProbe(ctx, opts, cluster, ch.Plan, render, job); err != nil {
			return err
		}
		if opts.PreflightOnly {
			// pipette-launch preflight shows or writes the preflight's own
			// job: its scripts must not start the training job.
			pj, _, err := templates.Preflight(job, cluster, ch.Plan, renderOptions(facts), templates.PreflightOptions{Timeout: opts.PreflightTimeout})
			if err != nil {
				return &cmdutil.InputError{Msg: "preflight: " + err.Error()}
			}
			job, summary = pj, "preflight of "+summary
		}
	}
	switch {
	case opts.DryRun && opts.JSON:
		var losses []lossView
		if nodes, _ := launchline.ParseNNodes(opts.NNodes); nodes.Elastic() {
			if losses, err = lossViews(opts, elasticRun{nodes: nodes, fw: fw, mode: mode, render: ranksFor}, job, ch.Plan.DP); err != nil {
				return err
			}
		}
		return printDryRunJSON(opts, summary, ch.Plan, job, losses)
	case opts.DryRun:
		if onExample(opts) {
			fmt.Fprintf(opts.IO.Out, "# dry run on the embedded example cluster (examples/cluster.yaml: made-up hosts, not yours); give --cluster FILE, --hosts or --hostfile for your own\n")
		}
		fmt.Fprintf(opts.IO.Out, "# %s\n", summary)
		for _, n := range opts.Notes {
			fmt.Fprintf(opts.IO.Out, "# %s\n", n)
		}
		if opts.Preflight && !opts.PreflightOnly {
			fmt.Fprintf(opts.IO.Out, "# --preflight: before the job, a collective test through its environment (pipette-launch preflight --dry-run shows that job)\n")
		}
		if opts.local {
			fmt.Fprintf(opts.IO.Out, "# runs on this machine without SSH, as torchrun does; its ranks meet on loopback (MASTER_ADDR=127.0.0.1)\n")
		}
		if opts.probeNote != "" {
			fmt.Fprintf(opts.IO.Out, "# %s\n", opts.probeNote)
		}
		if opts.slurm != nil {
			fmt.Fprintf(opts.IO.Out, "# started as one srun step in Slurm job %s (each task runs its node's agent):\n# %s\n", opts.slurm.JobID, launch.SrunCommand(*opts.slurm, *job))
		}
		if err := templates.Describe(opts.IO.Out, job); err != nil {
			return err
		}
		if nodes, _ := launchline.ParseNNodes(opts.NNodes); nodes.Elastic() {
			return describeLosses(opts, elasticRun{nodes: nodes, fw: fw, mode: mode, render: ranksFor}, job, ch.Plan.DP)
		}
		return nil
	case opts.OutputDir != "":
		for _, w := range append(job.Warnings, notInScripts(opts)...) {
			fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
		}
		return writeOutputDir(opts, job, summary)
	}
	if nodes, _ := launchline.ParseNNodes(opts.NNodes); nodes.Elastic() && !opts.PreflightOnly {
		if opts.Preflight {
			return cmdutil.InputErrorf("--preflight with --nnodes %s: an elastic job's attempts run no preflight yet; run pipette-launch preflight on the hosts first", opts.NNodes)
		}
		return runElastic(ctx, opts, elasticRun{nodes: nodes, fw: fw, mode: mode, render: renderFor})
	}
	// A quick probe (over SSH, or srun steps in a Slurm allocation) finds
	// where the ranks meet and the interpreter.
	if facts, err = probeForLaunch(ctx, opts, cluster, ch.Plan); err != nil {
		return err
	}
	if opts.pool != nil {
		defer opts.pool.Close()
	}
	if job, err = render(facts); err != nil {
		return err
	}
	for _, w := range append(facts.warnings, job.Warnings...) {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: warning: %s\n", w)
	}
	fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", summary)
	for _, n := range opts.Notes {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: %s\n", n)
	}
	if err := WriteRunPlan(opts, ch.Plan); err != nil {
		return err
	}
	if job.WorkDir == "" {
		// torchrun's behaviour: ranks start in the directory pipette-launch
		// runs in (the same path on every host, as on a shared filesystem),
		// so a relative script path means the same thing here and there.
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("launch directory: %w (give --workdir)", err)
		}
		job.WorkDir = wd
	}
	if opts.Preflight || opts.PreflightOnly {
		o := renderOptions(facts)
		if err := runPreflight(ctx, job, cluster, ch.Plan, o, opts); err != nil || opts.PreflightOnly {
			return err
		}
	}
	return opts.launch()(ctx, job, opts)
}

// defaultHosts gives a line that names no hosts the hosts its launcher
// would use (launchline.Line.DefaultHosts); a cluster file or the Slurm
// allocation names them.
func defaultHosts(o *Options) error {
	named := o.ClusterFile != "" || cmdutil.EnvLookup(o.Env)("SLURM_JOB_NODELIST") != ""
	ds := ChooseFramework(o) == parallel.FrameworkDeepSpeed
	o.LocalRankFromScript(o.WorkDir, ds)
	return o.DefaultHosts(named, ds, o.Env)
}

// CheckOptions rejects contradictory flags and a missing script.
func CheckOptions(o *Options) error {
	switch {
	case o.JSON && !o.DryRun:
		return cmdutil.InputErrorf("--json works only with --dry-run (or plan --json, probe --json): a launched job's output is its ranks' own")
	case o.Script == "":
		return cmdutil.InputErrorf("no training script given: usage: pipette-launch [flags] script.py [script args...]")
	case o.NoPython && o.Module:
		return cmdutil.InputErrorf("--no-python and --module (-m) cannot be used together: pick how the script runs")
	case o.ClusterFile != "" && (o.Hosts != "" || o.Hostfile != ""):
		return cmdutil.InputErrorf("--cluster cannot be combined with --hosts/--hostfile: the cluster file already lists the hosts")
	case o.Hosts != "" && o.Hostfile != "":
		return cmdutil.InputErrorf("--hosts and --hostfile both list hosts: give one")
	case o.PlanIndex < 1:
		return cmdutil.InputErrorf("--plan %d: plans are numbered from 1", o.PlanIndex)
	case o.MasterPort < 1 || o.MasterPort > 65535:
		return cmdutil.InputErrorf("--master-port %d: want 1-65535", o.MasterPort)
	case o.MaxRestarts < 0:
		return cmdutil.InputErrorf("--max-restarts %d: want >= 0", o.MaxRestarts)
	case o.PreflightOnly && o.OutputDir != "":
		// Its ranks only report; the verdict (which group, hosts and
		// transport fail) is judged from every rank's reports as they run.
		return cmdutil.InputErrorf("preflight --output-dir: the preflight's verdict is pipette-launch's, judged from every rank's reports as they run, which scripts run by hand cannot give; run pipette-launch preflight on the hosts (it starts, judges and stops the test), or --dry-run to see its job")
	}
	if err := cmdutil.CheckOneSlurmTask(cmdutil.EnvLookup(o.Env)); err != nil {
		return err
	}
	if o.Framework != "" && !slices.Contains([]string{"megatron", "deepspeed", "torch"}, o.Framework) {
		return cmdutil.InputErrorf("--framework %q: want megatron, deepspeed or torch", o.Framework)
	}
	if err := checkScript(o); err != nil {
		if !o.DryRun {
			return err
		}
		// A dry run starts nothing, so it still shows the launch (the README
		// example works on a machine without Megatron checked out).
		fmt.Fprintf(o.IO.ErrOut, "pipette-launch: warning: %v\n", err)
	}
	return nil
}

// checkScript requires a script path to exist here. torchrun checks nothing,
// but a typo then fails on every host after the launch; the same path is
// used on every host, so a job started from a shared or synced directory
// sees it here too. --no-check-script is for scripts that exist only on the
// hosts; modules and bare program names (found on PATH there) are not checked.
func checkScript(o *Options) error {
	if o.NoCheckScript || o.Module {
		return nil
	}
	if o.NoPython && !strings.Contains(o.Script, "/") {
		return nil
	}
	path := o.Script
	if o.WorkDir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(o.WorkDir, path)
	}
	if _, err := os.Stat(path); err != nil {
		return cmdutil.InputErrorf("script %s not found here (%v); it runs under the same path on every host: fix the path, or pass --no-check-script if it exists only on the hosts", o.Script, err)
	}
	return nil
}

// ChooseFramework applies --framework or guesses from the script.
func ChooseFramework(o *Options) parallel.Framework {
	if o.Framework != "" {
		return parallel.Framework(o.Framework)
	}
	for _, a := range o.ScriptArgs {
		name, _, _ := strings.Cut(a, "=")
		if name == "--deepspeed" || name == "--deepspeed_config" || name == "--deepscale_config" {
			return parallel.FrameworkDeepSpeed
		}
	}
	if megatron.LooksLike(o.Script, o.ScriptArgs) {
		return parallel.FrameworkMegatron
	}
	return parallel.FrameworkTorch
}

// PlanJob loads the cluster and chooses the plan, priced for the network
// the job's NCCL settings will use (planner.OnFabric: under --nccl-mode
// auto a Megatron job across islands is priced with one network per group
// type, and on sockets everywhere when the renderer cannot keep RDMA
// inside islands for it). planned says the cluster came from a cluster
// file (not listed hosts).
func PlanJob(o *Options, fw parallel.Framework, mode fabric.Mode) (c *cluster.Cluster, ch *PlanChoice, planned bool, err error) {
	resolve := func(t fabric.Transport) (*cluster.Cluster, error) {
		c, p, err := LoadCluster(o, t)
		planned = p
		return c, err
	}
	plan := func(c *cluster.Cluster) (*PlanChoice, *search.Plan, error) {
		var err error
		if ch, err = ChoosePlan(o, c, fw, planned); err != nil {
			return nil, nil, err
		}
		return ch, ch.Plan, nil
	}
	fallback := func(c *cluster.Cluster, p *search.Plan) string { // after plan: ch is its choice
		if !planned {
			return ""
		}
		return templates.IslandsFallback(c, p, templates.Options{Script: o.Script, Args: ch.Args, Env: o.Env})
	}
	c, ch, err = planner.OnFabric(mode.TransportFor(fw), resolve, plan, fallback, nil)
	return c, ch, planned, err
}

// LoadCluster resolves the cluster: a cluster file (or the embedded
// example) is planned on; --hosts/--hostfile only lists hosts, so ranks go
// in torchrun's order. --nnodes and --nproc-per-node cap what is used. A
// cluster file is priced for transport t (PlanJob says which).
func LoadCluster(o *Options, t fabric.Transport) (c *cluster.Cluster, planned bool, err error) {
	nodes, err := launchline.ParseNNodes(o.NNodes)
	if err != nil {
		return nil, false, err
	}
	nproc, allGPUs, err := launchline.ParseNProc(o.NProcPerNode)
	if err != nil {
		return nil, false, err
	}
	// Hosts come from --hosts/--hostfile, else (without a cluster file)
	// Slurm's node list, for a dry run and --output-dir as for a launch;
	// the embedded example is never launched on or written out.
	listed := o.Hosts != "" || o.Hostfile != "" || fromSlurm(o)
	if o.NProcPerNode == "cpu" && !listed {
		return nil, false, cmdutil.InputErrorf("--nproc-per-node cpu is torchrun's one rank per CPU of this machine, for a job on it alone; a cluster file is planned for its GPUs: give a number, gpu or auto")
	}
	if o.ClusterFile == "" && !listed {
		return nil, false, cmdutil.InputErrorf("no hosts to launch on: give --cluster FILE (write one with pipette-launch probe), --hosts or --hostfile, --standalone for this machine, or run inside a Slurm allocation")
	}
	if onExample(o) && !o.DryRun {
		what := "the embedded example cluster's hosts are made up: it is only for --dry-run and plan"
		if o.OutputDir != "" {
			what = "--output-dir: " + what
		}
		return nil, false, cmdutil.InputErrorf("--cluster %s: %s; give --cluster FILE (write one with pipette-launch probe), --hosts or --hostfile, or leave them out to run on this machine", cmdutil.ExampleCluster, what)
	}
	if listed {
		hosts, err := listedHosts(o, nproc, allGPUs)
		if err != nil {
			return nil, false, err
		}
		if o.Include != "" || o.Exclude != "" {
			if o.NNodes != "" || o.NProcPerNode != "" {
				return nil, false, cmdutil.InputErrorf("--include/--exclude cannot be combined with --num_nodes/--num_gpus (--nnodes/--nproc-per-node), as in DeepSpeed")
			}
			var slots [][]int
			if hosts, slots, err = cmdutil.FilterResources(hosts, o.Include, o.Exclude); err != nil {
				return nil, false, err
			}
			for _, s := range slots {
				o.devices = append(o.devices, cmdutil.DeviceList(s))
			}
		}
		if o.keep != nil { // an elastic attempt's hosts
			hosts = slices.DeleteFunc(hosts, func(h remote.HostSpec) bool { return !o.keep[h.Name] })
		} else if err := checkMinNodes(o.NNodes, nodes, len(hosts), "listed"); err != nil {
			return nil, false, err
		}
		if nodes.Max > 0 {
			hosts = hosts[:min(nodes.Max, len(hosts))]
		}
		return hostsCluster(hosts), false, nil
	}
	if o.Include != "" || o.Exclude != "" {
		return nil, false, cmdutil.InputErrorf("--include/--exclude filter the hosts of --hostfile/--hosts (DeepSpeed's syntax host:slot,slot@host); a cluster file is planned on as a whole: use --nnodes/--nproc-per-node")
	}
	data, name := examples.DefaultCluster, "embedded example cluster (examples/cluster.yaml)"
	if !onExample(o) {
		data, err = inputfile.Read(o.ClusterFile, limits.MaxFileBytes)
		if err != nil {
			return nil, false, cmdutil.InputErrorf("cluster file: %v", err)
		}
		name = o.ClusterFile
	}
	f, err := cluster.Parse(data)
	if err != nil {
		return nil, false, cmdutil.InputErrorf("%s: %v", name, err)
	}
	if o.keep != nil { // an elastic attempt's hosts
		f.Subset(o.keep)
		nodes.Min = 0
	}
	if err := capCluster(f, o.NNodes, nodes, nproc); err != nil {
		return nil, false, err
	}
	c, err = f.ResolveFor(t)
	if err != nil {
		return nil, false, cmdutil.InputErrorf("%s: %v", name, err)
	}
	return c, true, nil
}

// fromSlurm: the hosts are the Slurm allocation's (no cluster file, no
// --hosts/--hostfile, SLURM_JOB_NODELIST set).
func fromSlurm(o *Options) bool {
	return o.ClusterFile == "" && o.Hosts == "" && o.Hostfile == "" && cmdutil.EnvLookup(o.Env)("SLURM_JOB_NODELIST") != ""
}

// onExample: the job is planned on the embedded example cluster's made-up
// hosts (--cluster example, and no file of that name here; only a dry run
// gets that far).
func onExample(o *Options) bool {
	if o.ClusterFile != cmdutil.ExampleCluster {
		return false
	}
	_, err := os.Stat(o.ClusterFile)
	return err != nil
}

// checkMinNodes refuses a host count below what --nnodes (flag, read as
// nodes) asks for: N hosts, or at least MIN of an elastic MIN:MAX.
func checkMinNodes(flag string, nodes launchline.Nodes, have int, where string) error {
	switch {
	case nodes.Elastic() && nodes.Min > have:
		return cmdutil.InputErrorf("--nnodes %s: MIN %d is above the %d hosts %s; lower MIN or list more hosts", flag, nodes.Min, have, where)
	case !nodes.Elastic() && nodes.Min > have:
		return cmdutil.InputErrorf("--nnodes %d but only %d hosts are %s", nodes.Min, have, where)
	}
	return nil
}

// capCluster keeps the first MAX hosts of --nnodes (file order) and at most nproc
// GPUs per host, torchrun's meaning of those flags.
func capCluster(f *cluster.File, flag string, nodes launchline.Nodes, nproc int) error {
	nnodes := nodes.Max
	total := 0
	for _, is := range f.Clusters {
		total += len(is.Hosts)
		if nproc > is.GPUsPerHost {
			return cmdutil.InputErrorf("--nproc-per-node %d, but the hosts of island %s have %d GPUs", nproc, is.Name, is.GPUsPerHost)
		}
	}
	if nodes.Min > total {
		if nodes.Elastic() {
			return checkMinNodes(flag, nodes, total, "in the cluster file")
		}
		return cmdutil.InputErrorf("--nnodes %d, but the cluster file lists %d hosts", nnodes, total)
	}
	if nproc > 0 {
		for i := range f.Clusters {
			f.Clusters[i].GPUsPerHost = nproc
		}
	}
	if nnodes > 0 { // the first nnodes hosts, in the file's order
		kept := map[string]bool{}
		for _, is := range f.Clusters {
			for _, h := range is.Hosts {
				if len(kept) < nnodes {
					kept[h.Name] = true
				}
			}
		}
		f.Subset(kept)
	}
	return nil
}

// listedHosts reads --hosts, --hostfile (DeepSpeed's `HOST slots=N` or one
// host per line) or SLURM_JOB_NODELIST. --nproc-per-node caps a hostfile's
// slots and gives the rank count where none is listed (torchrun's default 1).
func listedHosts(o *Options, nproc int, allGPUs bool) ([]remote.HostSpec, error) {
	hosts, err := remote.ResolveHosts(remote.HostSources{Hosts: o.Hosts, Hostfile: o.Hostfile, Getenv: cmdutil.EnvLookup(o.Env)})
	if err != nil {
		return nil, &cmdutil.InputError{Msg: err.Error()}
	}
	if allGPUs {
		if !runsHere(o, remote.Targets(hosts)) {
			if o.NProcPerNode == "cpu" {
				return nil, cmdutil.InputErrorf("--nproc-per-node cpu counts this machine's CPUs, as torchrun does where it runs: only for a job on this machine alone; give a number with --hosts/--hostfile")
			}
			return nil, cmdutil.InputErrorf("--nproc-per-node %s needs a cluster file that says how many GPUs each host has (or a job on this machine alone, counted here); give a number with --hosts/--hostfile", o.NProcPerNode)
		}
		if nproc, err = localRanksPerNode(o); err != nil {
			return nil, err
		}
	}
	if nproc == 0 && o.Hosts == "" && o.Hostfile == "" {
		// Hosts from the Slurm allocation: one rank per GPU Slurm gave each
		// node, where it says (--gpus-per-node), else torchrun's default 1.
		nproc, _ = strconv.Atoi(cmdutil.EnvLookup(o.Env)("SLURM_GPUS_ON_NODE"))
	}
	ranks := 0
	for i := range hosts {
		switch {
		case hosts[i].Slots == 0:
			hosts[i].Slots = max(nproc, o.DefaultSlots, 1)
		case nproc > 0:
			hosts[i].Slots = min(hosts[i].Slots, nproc)
		}
		ranks += hosts[i].Slots
	}
	if ranks > limits.MaxRanks {
		return nil, cmdutil.InputErrorf("%d hosts x ranks per host = %d ranks; at most %d in one job", len(hosts), ranks, limits.MaxRanks)
	}
	return hosts, nil
}

// hostsCluster is a cluster of listed hosts with nothing probed: no NICs
// (NCCL keeps its own detection) and unknown GPUs.
func hostsCluster(hosts []remote.HostSpec) *cluster.Cluster {
	island := cluster.Island{Spec: cluster.IslandSpec{Name: "hosts"}}
	var hs []cluster.Host
	for i, h := range hosts {
		island.Hosts = append(island.Hosts, i)
		entry := cluster.HostEntry{Name: h.Name, Address: cmp.Or(h.Addr, h.Name), User: h.User, Port: h.Port}
		hs = append(hs, cluster.Host{HostEntry: entry, GPUs: h.Slots})
	}
	n := len(hs)
	bw, lat := make([][]float64, n), make([][]float64, n)
	for i := range bw {
		bw[i], lat[i] = make([]float64, n), make([]float64, n)
	}
	return cluster.NewCluster([]cluster.Island{island}, hs, bw, lat)
}

// checkRankFilters rejects --local-ranks-filter and --quiet-ranks entries
// that name no rank of the job: a filter that matches nothing would hide
// all output without a word.
func checkRankFilters(o *Options, job *job.Job) error {
	perHost, world := 0, 0
	for _, h := range job.Hosts {
		perHost = max(perHost, len(h.Ranks))
		world += len(h.Ranks)
	}
	for _, r := range o.LocalRanksFilter {
		if r >= perHost {
			return cmdutil.InputErrorf("--local-ranks-filter %d: local ranks of this job are 0..%d", r, perHost-1)
		}
	}
	for _, r := range o.QuietRanks {
		if r >= world {
			return cmdutil.InputErrorf("--quiet-ranks %d: ranks of this job are 0..%d", r, world-1)
		}
	}
	return nil
}

// printDryRunJSON is --dry-run --json: one JSON object with the summary,
// the job (secrets masked as in the text form), the chosen plan, as `plan
// --json` prints one, and for an elastic job the plan after each single
// loss (the text form's "# elastic" lines).
func printDryRunJSON(opts *Options, summary string, plan *search.Plan, job *job.Job, losses []lossView) error {
	out := struct {
		Summary        string `json:"summary"`
		ExampleCluster bool   `json:"example_cluster,omitempty"`
		RunsHere       bool   `json:"runs_here_without_ssh,omitempty"`
		SrunCommand    string `json:"srun_command,omitempty"`
		LaunchProbe    string `json:"launch_probe,omitempty"`
		templates.JobView
		Plan        *search.Plan `json:"plan,omitempty"`
		AfterLosing []lossView   `json:"elastic_after_losing,omitempty"`
	}{Summary: summary, ExampleCluster: onExample(opts), RunsHere: opts.local, LaunchProbe: opts.probeNote, JobView: templates.View(job), Plan: plan,
		AfterLosing: losses}
	if opts.slurm != nil {
		out.SrunCommand = launch.SrunCommand(*opts.slurm, *job)
	}
	enc := json.NewEncoder(opts.IO.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
