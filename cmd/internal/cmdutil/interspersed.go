package cmdutil

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"
)

// InterspersedArgs lets a command take flags after its positional
// arguments (urfave/cli v2 stops reading flags at the first one, so
// `calibrate --cluster c.yaml r0.log --model m.yaml` read "--model" as a
// log file): every flag of c's command found among c.Args() is set on c,
// and the positional arguments are returned. "--" ends the flags.
func InterspersedArgs(c *cli.Context) ([]string, error) {
	var pos []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f := commandFlag(c.Command, name)
		if f == nil {
			return nil, fmt.Errorf("%s: unknown flag %s (flags may follow the log files, but must be %s's own)", c.Command.Name, a, c.Command.Name)
		}
		if !hasVal {
			if _, isBool := f.(*cli.BoolFlag); isBool {
				val = "true"
			} else {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%s: flag %s needs a value", c.Command.Name, a)
				}
				i++
				val = args[i]
			}
		}
		if err := c.Set(name, val); err != nil {
			return nil, fmt.Errorf("%s: %s %q: %w", c.Command.Name, a, val, err)
		}
	}
	return pos, nil
}

func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}
