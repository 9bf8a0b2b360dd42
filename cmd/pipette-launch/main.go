// Command pipette-launch replaces torchrun on heterogeneous clusters: it
// plans parallelism and placement from a cluster description, renders the
// Megatron-LM, DeepSpeed or torch launch, and starts it on every host.
//
// main only wires the commands together; each lives in its own package
// under cmd/internal (docs/architecture.md).
package main

import (
	"os"
	"runtime/debug"

	"github.com/pipette-launch/pipette-launch/cmd/internal/calibrate"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/plan"
	"github.com/pipette-launch/pipette-launch/cmd/internal/preflight"
	"github.com/pipette-launch/pipette-launch/cmd/internal/probe"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/pipette-launch/pipette-launch/cmd/internal/sbatch"
	"github.com/urfave/cli/v2"
)

// gcPercent is the collector's target when GOGC is not set. The planner
// allocates a short-lived evaluation per configuration and placement move:
// at Go's default (100) collection took a fifth of the CPU time of a plan
// on 2,048 hosts (16,384 GPUs), and 400 saves most of it for about 30 MB
// more peak heap (bench/guard/README.md). A supervising launcher's live
// heap is a few MB, so the factor costs little there either.
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	io := &cmdutil.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(cmdutil.Execute(newApp(io, nil), os.Args, io))
}

// newApp builds the CLI with every command; the bare form is run. adjust,
// when set, changes run's options before they are used (tests inject the
// launch there).
func newApp(io *cmdutil.IOStreams, adjust func(*run.Options)) *cli.App {
	r := run.NewCmd(io, adjust)
	return cmdutil.NewApp(io, r, r, preflight.NewCmd(io, adjust), plan.NewCmd(io), probe.NewCmd(io), sbatch.NewCmd(io), calibrate.NewCmd(io))
}
