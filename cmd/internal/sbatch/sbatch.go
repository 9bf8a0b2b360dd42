package sbatch

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/templates"
)

// Options are `pipette-launch sbatch`'s inputs: its own flags, and the
// run inside the allocation (every other flag is run's and is passed on).
type Options struct {
	IO                                *cmdutil.IOStreams
	Time, Partition, Account, JobName string
	// SignalBefore asks Slurm to send SIGTERM this long before the time
	// limit, so pipette-launch stops the ranks with its grace period.
	SignalBefore time.Duration
	Extra        []string // more #SBATCH lines, verbatim
	Write        string   // the batch script's path; "-" is stdout

	// Run is the run the batch script starts, planned here to ask for its
	// nodes; RunFlags are its flags as the user gave them, passed on.
	Run      *run.Options
	RunFlags []string
	// Self is the pipette-launch the batch script runs (os.Executable when
	// ""); Dir is where it starts (the launch directory when "").
	Self, Dir string
}

// sbatchFlagNames are the flags not passed on to the inner run.
var sbatchFlagNames = []string{"time", "partition", "account", "job-name", "signal-before", "sbatch-arg", "write", "launcher"}

func sbatchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "time", Usage: "#SBATCH --time (e.g. 2:00:00)"},
		&cli.StringFlag{Name: "partition", Usage: "#SBATCH --partition"},
		&cli.StringFlag{Name: "account", Usage: "#SBATCH --account"},
		&cli.StringFlag{Name: "job-name", Usage: "#SBATCH --job-name (default: --run-id)"},
		&cli.DurationFlag{Name: "signal-before", Value: 2 * time.Minute, Usage: "with --time: Slurm sends SIGTERM this long before the limit, and pipette-launch stops every rank with its grace period"},
		&cli.StringSliceFlag{Name: "sbatch-arg", Usage: "another #SBATCH option, verbatim (repeatable, e.g. --sbatch-arg=--exclusive)"},
		&cli.StringFlag{Name: "write", Value: "-", Usage: "where to write the batch script (- for stdout)"},
	}
}

// NewCmd is `pipette-launch sbatch`.
func NewCmd(io *cmdutil.IOStreams) *cli.Command {
	return &cli.Command{
		Name:      "sbatch",
		Usage:     "write a Slurm batch script that runs the job with pipette-launch inside its allocation",
		ArgsUsage: "script.py [script args...]",
		Description: `Takes run's flags and the training command line, and writes a batch script with
#SBATCH --nodes/--ntasks-per-node/--gpus-per-node/--nodelist from the plan (or from
--hosts/--hostfile, or --nnodes) and --time/--partition/--account, whose body runs
'pipette-launch run --launcher slurm' with the same flags inside the allocation.
Submit it with sbatch.`,
		Flags: append(run.Flags(), sbatchFlags()...),
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch sbatch: %v (see pipette-launch sbatch --help)", err), 2)
		},
		Action: func(c *cli.Context) error { return cmdutil.ExitFor(sbatchAction(c, io)) },
	}
}

func sbatchAction(c *cli.Context, io *cmdutil.IOStreams) error {
	ro, err := run.OptionsFromCLI(c, io, os.Environ())
	if err != nil {
		return err
	}
	return Run(&Options{IO: io, Time: c.String("time"), Partition: c.String("partition"), Account: c.String("account"),
		JobName: c.String("job-name"), SignalBefore: c.Duration("signal-before"), Extra: c.StringSlice("sbatch-arg"), Write: c.String("write"),
		Run: ro, RunFlags: passedFlags(c, run.Flags(), sbatchFlagNames)})
}

// Run plans the job as run would and writes the batch script.
func Run(so *Options) error {
	opts := so.Run
	if opts.JSON { // the batch job would fail on it at start (run --json needs --dry-run)
		return cmdutil.InputErrorf("sbatch: --json is for run --dry-run, plan and probe, not for a batch script")
	}
	if so.JobName == "" {
		so.JobName = opts.RunID
	}
	if err := checkDirectives(so); err != nil {
		return err
	}
	nodes, err := sbatchNodes(opts)
	if err != nil {
		return err
	}
	self, wd := so.Self, so.Dir
	if self == "" {
		if self, err = os.Executable(); err != nil {
			return fmt.Errorf("sbatch: find pipette-launch itself: %w", err)
		}
	}
	if wd == "" {
		if wd, err = os.Getwd(); err != nil {
			return fmt.Errorf("sbatch: launch directory: %w", err)
		}
	}
	inner := append([]string{self, "run", "--launcher", cmdutil.LauncherSlurm}, so.RunFlags...)
	inner = append(append(inner, opts.Script), opts.ScriptArgs...)
	text := batchScript(*so, nodes, wd, inner)
	if so.Write == "-" {
		_, err := so.IO.Out.Write([]byte(text))
		return err
	}
	// Replaced whole, through a symlink to its target, keeping its mode.
	if err := atomicfile.WriteThrough(so.Write, []byte(text), 0o755); err != nil {
		return fmt.Errorf("sbatch: write %s: %w", so.Write, err)
	}
	fmt.Fprintf(so.IO.ErrOut, "pipette-launch: wrote %s; submit it with: sbatch %s\n", so.Write, shellquote.Quote(so.Write))
	return nil
}

// batchNodes is what the allocation must hold.
type batchNodes struct {
	Count int
	// Min, when above 0 and below Count, asks for Min to Count nodes, as
	// Slurm's --nodes MIN-MAX (an elastic --nnodes MIN:MAX).
	Min         int
	Names       []string // empty: any nodes
	GPUsPerNode int      // 0: do not ask for GPUs (CPU hosts, or unknown)
	// Elastic: an elastic --nnodes MIN:MAX, whose allocation must outlive
	// a failed node (--no-kill): Slurm otherwise ends the whole job on a
	// node failure, and no restart on the nodes left is possible.
	Elastic bool
}

// sbatchNodes plans (with --cluster, --hosts or --hostfile) as a run would
// and asks for exactly the job's hosts; with none of them, --nnodes says how
// many nodes, and the run inside the allocation takes them as Slurm gives
// them.
func sbatchNodes(o *run.Options) (batchNodes, error) {
	if err := run.CheckOptions(o); err != nil {
		return batchNodes{}, err
	}
	if o.ClusterFile == "" && o.Hosts == "" && o.Hostfile == "" {
		nodes, err := launchline.ParseNNodes(o.NNodes)
		if err != nil {
			return batchNodes{}, err
		}
		n := nodes.Max
		if n <= 0 {
			return batchNodes{}, cmdutil.InputErrorf("sbatch: say which nodes to ask for: --nnodes N, or --cluster/--hosts/--hostfile")
		}
		return batchNodes{Count: n, Min: nodes.Min, Elastic: nodes.Elastic()}, nil
	}
	fw := run.ChooseFramework(o)
	mode, err := fabric.ParseMode(o.NCCLMode)
	if err != nil {
		return batchNodes{}, &cmdutil.InputError{Msg: err.Error()}
	}
	cluster, ch, planned, err := run.PlanJob(o, fw, mode)
	if err != nil {
		return batchNodes{}, err
	}
	job, err := templates.Render(ch.Plan, cluster, templates.Options{Name: o.RunID, Script: o.Script, Args: ch.Args,
		Python: o.Python, NoPython: o.NoPython, Module: o.Module, MasterPort: o.MasterPort,
		DSUser: ch.DS, DSPassThrough: !planned, Unplanned: !planned, DSOverride: o.PlanOverridesConfig})
	if err != nil {
		return batchNodes{}, &cmdutil.InputError{Msg: fmt.Sprintf("render %s launch: %v", fw, err)}
	}
	nodes, _ := launchline.ParseNNodes(o.NNodes) // CheckOptions read it
	b := batchNodes{Count: len(job.Hosts), Elastic: nodes.Elastic()}
	gpus := planned
	for _, h := range job.Hosts {
		b.Names = append(b.Names, h.Name)
		b.GPUsPerNode = max(b.GPUsPerNode, len(h.Ranks))
	}
	for _, h := range cluster.Hosts {
		if h.GPU.Model == probe.CPUModel {
			gpus = false
		}
	}
	if !gpus {
		b.GPUsPerNode = 0
	}
	return b, nil
}

// passedFlags re-renders the flags the user set, except skip, as
// command-line words for the run inside the allocation.
func passedFlags(c *cli.Context, flags []cli.Flag, skip []string) []string {
	var out []string
	for _, f := range flags {
		name := f.Names()[0]
		if slices.Contains(skip, name) || !c.IsSet(name) {
			continue
		}
		switch f.(type) {
		case *cli.BoolFlag:
			out = append(out, fmt.Sprintf("--%s=%t", name, c.Bool(name)))
		case *cli.StringSliceFlag:
			for _, v := range c.StringSlice(name) {
				out = append(out, "--"+name, v)
			}
		default:
			// A repeatable flag of our own (--env) gives its values
			// as a []string: each is passed on as given.
			switch v := c.Value(name).(type) {
			case []string:
				for _, s := range v {
					out = append(out, "--"+name, s)
				}
			default:
				out = append(out, "--"+name, fmt.Sprint(v))
			}
		}
	}
	return out
}

// batchScript is the batch script: every #SBATCH line first (Slurm reads
// none after the first command), values quoted by directive, then the
// body, every word quoted for sh.
func batchScript(o Options, n batchNodes, wd string, inner []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by pipette-launch sbatch: submit with sbatch. The job runs as one\n" +
		"# srun step started by pipette-launch inside the allocation (one task per node).\n")
	b.WriteString(directive("job-name", o.JobName))
	if n.Min > 0 && n.Min < n.Count {
		b.WriteString(directive("nodes", fmt.Sprintf("%d-%d", n.Min, n.Count)))
	} else {
		b.WriteString(directive("nodes", strconv.Itoa(n.Count)))
	}
	b.WriteString(directive("ntasks-per-node", "1"))
	if n.Elastic {
		b.WriteString("#SBATCH --no-kill\n")
	}
	if len(n.Names) > 0 {
		b.WriteString(directive("nodelist", strings.Join(n.Names, ",")))
	}
	if n.GPUsPerNode > 0 {
		b.WriteString(directive("gpus-per-node", strconv.Itoa(n.GPUsPerNode)))
	}
	if o.Time != "" {
		b.WriteString(directive("time", o.Time))
		if o.SignalBefore > 0 {
			b.WriteString(directive("signal", fmt.Sprintf("B:TERM@%d", int(o.SignalBefore/time.Second))))
		}
	}
	if o.Partition != "" {
		b.WriteString(directive("partition", o.Partition))
	}
	if o.Account != "" {
		b.WriteString(directive("account", o.Account))
	}
	for _, e := range o.Extra {
		fmt.Fprintf(&b, "#SBATCH %s\n", e) // verbatim, one line (checkDirectives)
	}
	fmt.Fprintf(&b, "cd %s || exit 1\n", shellquote.Quote(filepath.Clean(wd)))
	fmt.Fprintf(&b, "exec %s\n", shellquote.Join(inner))
	return b.String()
}
