package cmdutil

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// ExpandAbbreviations gives a launch line's long flags the unambiguous
// prefixes torchrun's argparse accepts (allow_abbrev: `--nnode=2` is
// --nnodes, as HF's DeepSpeed docs write it): each --PREFIX[=V] before the
// script that names no flag but starts exactly one flag's name (or alias)
// is rewritten to that name. Only the commands that read launch lines get
// this (the bare form and those with --nproc-per-node: run, preflight,
// sbatch); an ambiguous prefix is left for the parser to refuse, and the
// script's own arguments (after the first positional one, or "--") are
// never touched.
func ExpandAbbreviations(app *cli.App, args []string) []string {
	flags := app.Flags
	start := 1
	if len(args) > 1 {
		if cmd := app.Command(args[1]); cmd != nil {
			flags, start = cmd.Flags, 2
		}
	}
	if findFlag(flags, "nproc-per-node") == nil {
		return args
	}
	out := slices.Clone(args)
	for i := start; i < len(out); i++ {
		a := out[i]
		if a == "--" || !strings.HasPrefix(a, "-") || a == "-" {
			return out // the script: what follows is its own
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := findFlag(flags, name)
		if f == nil && strings.HasPrefix(a, "--") {
			if full, one := uniquePrefix(flags, name); one != nil {
				f, out[i] = one, "--"+full
				if hasVal {
					out[i] += "=" + val
				}
			}
		}
		if f != nil && !hasVal && !isBoolFlag(f) {
			i++ // the flag's value
		}
	}
	return out
}

// uniquePrefix is the one flag with a name starting with prefix, and that
// name; nil when none or several flags do.
func uniquePrefix(flags []cli.Flag, prefix string) (string, cli.Flag) {
	var name string
	var found cli.Flag
	for _, f := range flags {
		for _, n := range f.Names() {
			if len(n) > 1 && strings.HasPrefix(n, prefix) {
				if found != nil && found != f {
					return "", nil
				}
				if found == nil {
					name, found = n, f
				}
			}
		}
	}
	return name, found
}
