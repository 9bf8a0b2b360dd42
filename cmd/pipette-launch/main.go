// Command pipette-launch replaces torchrun on heterogeneous clusters: it
// plans parallelism and placement from a cluster description, renders the
// Megatron-LM, DeepSpeed or torch launch, and starts it on every host.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
)

func main() {
	io := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	os.Exit(runApp(os.Args, io))
}

// newApp builds the CLI. The bare form `pipette-launch [flags] script.py
// ARGS` is `run`, as torchrun users type it.
func newApp(io *IOStreams) *cli.App {
	run := newRunCmd(io)
	return &cli.App{
		Name:      "pipette-launch",
		Usage:     "plan and launch LLM training (Megatron-LM, DeepSpeed, torch) on heterogeneous clusters",
		UsageText: "pipette-launch [flags] script.py [script args...]\npipette-launch run [flags] script.py [script args...]\npipette-launch COMMAND [flags]",
		Version:   version(),
		Writer:    io.Out,
		ErrWriter: io.ErrOut,
		Flags:     run.Flags,
		Action:    run.Action,
		Commands:  []*cli.Command{run, newPlanCmd(io), newProbeCmd(io), newSbatchCmd(io), newCalibrateCmd(io)},
		// Errors are printed by runApp with the right exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch: %s (see pipette-launch --help)", didYouMean(err, c.App.Flags)), 2)
		},
	}
}

// runApp runs the CLI and returns the exit code: 0 ok, 2 bad input, 1
// anything else.
func runApp(args []string, io *IOStreams) int {
	err := newApp(io).Run(args)
	if err == nil {
		return 0
	}
	fmt.Fprintln(io.ErrOut, err)
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 2 // urfave/cli's own parse errors
}
