// Command pipette-launch replaces torchrun on heterogeneous clusters: it
// plans parallelism and placement from a cluster description, renders the
// Megatron-LM, DeepSpeed or torch launch, and starts it on every host.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

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
		Commands:  []*cli.Command{run, newPreflightCmd(io), newPlanCmd(io), newProbeCmd(io), newSbatchCmd(io), newCalibrateCmd(io)},
		// Errors are printed by runApp with the right exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch: %s (see pipette-launch --help)", didYouMean(err, c.App.Flags)), 2)
		},
	}
}

// runApp runs the CLI and returns the exit code: 0 ok, 2 bad input, 3
// does not fit, 1 anything else. With --json the error is one JSON object
// on stderr (see printJSONError).
func runApp(args []string, io *IOStreams) int {
	app := newApp(io)
	err := app.Run(args)
	if err == nil {
		return 0
	}
	code := 2 // urfave/cli's own parse errors
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if wantsJSON(app, args) {
		printJSONError(io.ErrOut, err.Error(), code)
	} else {
		fmt.Fprintln(io.ErrOut, err)
	}
	return code
}

// wantsJSON pre-scans the command line for --json, as urfave/cli would
// parse it: flags of the app, then of the command named first, stopping at
// the script (the first other positional argument) or "--", and skipping
// the values of flags that take one, so `--cluster x.yaml --json` counts
// and `script.py --json` (the script's own flag) does not.
func wantsJSON(app *cli.App, args []string) bool {
	flags := app.Flags
	command := false
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return false
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if cmd := app.Command(a); cmd != nil && !command {
				flags, command = cmd.Flags, true
				continue
			}
			return false
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "json" {
			return !hasValue || (value != "false" && value != "0")
		}
		if f := findFlag(flags, name); f != nil && !hasValue && !isBoolFlag(f) {
			i++ // the flag's value
		}
		command = true // a flag before any command name: the bare form
	}
	return false
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func isBoolFlag(f cli.Flag) bool {
	_, ok := f.(*cli.BoolFlag)
	return ok
}

// errPrefixes are what the commands put before an error's own words.
var errPrefixes = []string{"pipette-launch run: ", "pipette-launch: ", "plan: ", "probe: ", "sbatch: ", "run: "}

// fieldRe matches a flag (--tp, -o) or a file field
// (clusters[0].gpus_per_host) at the start of a message, ended by a space,
// colon, quote or "=".
var fieldRe = regexp.MustCompile(`^(--?[A-Za-z][A-Za-z0-9_-]*|[a-z_][a-z0-9_]*(\[[0-9]+\])?(\.[a-z_][a-z0-9_]*(\[[0-9]+\])?)*(\[[0-9]+\]|\.[a-z_][a-z0-9_]*))(?:[ :="]|$)`)

// errorField is the flag or file field an error message starts with
// (after the command's prefix and a "cluster FILE: cluster file: "
// context), else "".
func errorField(msg string) string {
	for _, p := range errPrefixes {
		msg = strings.TrimPrefix(msg, p)
	}
	if strings.HasPrefix(msg, "cluster ") {
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			msg = strings.TrimPrefix(rest, "cluster file: ")
		}
	}
	m := fieldRe.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	return m[1]
}

// printJSONError writes {"error", "field", "exit_code"} as one line:
// what --json callers parse instead of the text line.
func printJSONError(w io.Writer, msg string, code int) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // "> 0" stays readable
	err := enc.Encode(struct {
		Error    string `json:"error"`
		Field    string `json:"field"`
		ExitCode int    `json:"exit_code"`
	}{msg, errorField(msg), code})
	if err != nil {
		fmt.Fprintln(w, msg)
	}
}
