package preflight

import (
	"fmt"
	"os"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/urfave/cli/v2"
)

// NewCmd is `pipette-launch preflight`: run's flags, the job's
// rendered environment, the collective test instead of the script. adjust
// is NewCmd's (run's).
func NewCmd(io *cmdutil.IOStreams, adjust func(*run.Options)) *cli.Command {
	return &cli.Command{
		Name:      "preflight",
		Usage:     "prove every group's links before a job: all-reduce in each TP/CP/DP group, send/recv on each pipeline link, through the job's exact per-rank environment (same flags as run)",
		ArgsUsage: "script.py [script args...]",
		Flags:     run.Flags(),
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch preflight: %s (see pipette-launch preflight --help)", cmdutil.DidYouMean(err, c.Command.Flags)), 2)
		},
		Action: func(c *cli.Context) error {
			opts, err := run.OptionsFromCLI(c, io, os.Environ())
			if err != nil {
				return cmdutil.ExitFor(err)
			}
			if adjust != nil {
				adjust(opts)
			}
			opts.PreflightOnly = true
			return cmdutil.ExitFor(run.Run(c.Context, opts))
		},
	}
}
