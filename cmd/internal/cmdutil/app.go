package cmdutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// NewApp builds the CLI from its commands. The bare form `pipette-launch
// [flags] script.py ARGS` is def (run), as torchrun users type it; main
// passes every command, a command's tests only their own.
func NewApp(io *IOStreams, def *cli.Command, cmds ...*cli.Command) *cli.App {
	for _, c := range cmds {
		if c.OnUsageError == nil {
			// A mistyped flag gets its closest spelling, not the command's
			// whole usage (plan --globl-batch-size).
			c.OnUsageError = func(ctx *cli.Context, err error, _ bool) error {
				return cli.Exit(fmt.Sprintf("pipette-launch %s: %s (see pipette-launch %s --help)", ctx.Command.Name, DidYouMean(err, ctx.Command.Flags), ctx.Command.Name), 2)
			}
		}
	}
	return &cli.App{
		Name:        "pipette-launch",
		Usage:       "plan and launch LLM training (Megatron-LM, DeepSpeed, torch) on heterogeneous clusters",
		UsageText:   "pipette-launch [flags] script.py [script args...]\npipette-launch run [flags] script.py [script args...]\npipette-launch COMMAND [flags]",
		Version:     Version(),
		Description: def.Description,
		Writer:      io.Out,
		ErrWriter:   io.ErrOut,
		Flags:       def.Flags,
		Action:      def.Action,
		Commands:    cmds,
		// Errors are printed by Execute with the right exit code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return cli.Exit(fmt.Sprintf("pipette-launch: %s (see pipette-launch --help)", DidYouMean(err, c.App.Flags)), 2)
		},
	}
}

// Execute runs app on args and returns the exit code: 0 ok, 2 bad input, 3
// does not fit, 1 anything else. With --json the error is one JSON object
// on stderr (see printJSONError).
func Execute(app *cli.App, args []string, io *IOStreams) int {
	args = ExpandAbbreviations(app, args)
	err := app.Run(args)
	if err == nil {
		return 0
	}
	code := 2 // urfave/cli's own parse errors
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if WantsJSON(app, args) {
		printJSONError(io.ErrOut, err.Error(), code)
	} else {
		fmt.Fprintln(io.ErrOut, err)
	}
	return code
}

// WantsJSON pre-scans the command line for --json, as urfave/cli would
// parse it: flags of the app, then of the command named first, stopping at
// the script (the first other positional argument) or "--", and skipping
// the values of flags that take one, so `--cluster x.yaml --json` counts
// and `script.py --json` (the script's own flag) does not.
func WantsJSON(app *cli.App, args []string) bool {
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
