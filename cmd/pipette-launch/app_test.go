package main

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/urfave/cli/v2"
)

// These tests drive the whole CLI, every command wired as main wires them
// (the commands' own tests are in cmd/internal/...).

// testApp is the whole CLI with stable job ids.
func testApp(io *cmdutil.IOStreams) *cli.App {
	return newApp(io, func(o *run.Options) { o.NewJobID = cmdtest.JobID })
}

// runAppBuffers runs the CLI where the test is.
func runAppBuffers(args ...string) (code int, stdout, stderr string) {
	return cmdtest.Run(testApp, args...)
}

// runCLI runs the CLI in the commands' shared testdata with a clean
// environment.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cmdtest.RunInTestdata(t, testApp, args...)
}
