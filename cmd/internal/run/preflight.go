package run

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/preflight"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// launchPreflight starts the preflight job like launchJob, its output to
// out: Options.LaunchPreflight when nil.
func launchPreflight(ctx context.Context, job *job.Job, opts *Options, out io.Writer) error {
	return launch.Launch(ctx, *job, preflightLaunchOptions(opts, out))
}

// preflightLaunchOptions start the preflight job where the job itself will
// run: on this machine without SSH when the job does (--standalone, or its
// only host is this machine), else over SSH or srun.
func preflightLaunchOptions(opts *Options, out io.Writer) launch.Options {
	return launch.Options{
		Slurm:            opts.slurm,
		Local:            opts.local,
		SSH:              opts.SSH,
		Fanout:           opts.Fanout,
		Pool:             opts.pool,
		Out:              out,
		Grace:            opts.StopGrace,
		HeartbeatTimeout: opts.HeartbeatTimeout,
		KeepFiles:        opts.KeepFiles,
		// Eight ranks importing torch at once on a small host slow the
		// agents' start: the test's own timeouts bound the network.
		StartTimeout: 90 * time.Second,
	}
}

// runPreflight runs the collective test of the rendered job and prints
// the per-group table: to stdout for `pipette-launch preflight`, to
// stderr before a job (whose stdout is the ranks').
func runPreflight(ctx context.Context, job *job.Job, c *cluster.Cluster, p *search.Plan, o templates.Options, opts *Options) error {
	pj, spec, err := templates.Preflight(job, c, p, o, templates.PreflightOptions{Timeout: opts.PreflightTimeout})
	if err != nil {
		return &cmdutil.InputError{Msg: "preflight: " + err.Error()}
	}
	out := opts.IO.ErrOut
	if opts.PreflightOnly {
		out = opts.IO.Out
	}
	fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: preflight: %d groups on %d hosts\n", countGroups(spec), len(pj.Hosts))
	var col preflight.Collector
	launchErr := opts.launchPreflight()(ctx, pj, opts, &col)
	rep := preflight.Evaluate(spec, col.Events(), opts.PreflightMinShare)
	rep.Write(out, spec)
	if tail := col.Other(); (rep.Failed != nil || launchErr != nil) && len(tail) > 0 {
		fmt.Fprintf(opts.IO.ErrOut, "pipette-launch: preflight: the ranks' last other output lines:\n%s\n", strings.Join(tail, "\n"))
	}
	switch {
	case rep.Failed != nil:
		return cli.Exit("preflight failed: "+rep.Reason, cmdutil.ExitFailure)
	case launchErr != nil:
		return cli.Exit(fmt.Sprintf("preflight failed: %v", launchErr), cmdutil.ExitFailure)
	}
	return nil
}

func countGroups(spec *templates.PreflightSpec) int {
	n := 0
	for _, ph := range spec.Phases {
		n += len(ph.Groups)
	}
	return n
}
