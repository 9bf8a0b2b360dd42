package main

import (
	"strings"
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

// TestMistypedFlagSaysDidYouMean (issue 21): a mistyped flag of any command
// (plan --globl-batch-size) gets its closest spelling in one line, exit 2,
// not the command's whole usage.
func TestMistypedFlagSaysDidYouMean(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--globl-batch-size", "8"},
		{"probe", "--hostz", "n1"},
		{"calibrate", "--clustr", "c.yaml"},
	} {
		code, out, errOut := runAppBuffers(args...)
		if code != 2 || !strings.Contains(errOut, "did you mean --") || strings.Contains(out+errOut, "USAGE") || strings.Count(errOut, "\n") > 2 {
			t.Errorf("%v: exit %d\nstderr: %s\nstdout: %.300s", args, code, errOut, out)
		}
	}
}
