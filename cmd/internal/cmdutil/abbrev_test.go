package cmdutil

import (
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestExpandAbbreviations (issue 30): torchrun's argparse takes
// unambiguous prefixes of its long flags (--nnode=2 in HF's DeepSpeed
// docs); ambiguous ones, exact names and the script's own arguments stay.
func TestExpandAbbreviations(t *testing.T) {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "nproc-per-node", Aliases: []string{"nproc_per_node"}},
		&cli.StringFlag{Name: "nnodes"},
		&cli.BoolFlag{Name: "no-python"},
		&cli.BoolFlag{Name: "no-local-rank"},
		&cli.IntFlag{Name: "max-restarts", Aliases: []string{"max_restarts"}},
	}
	app := &cli.App{Flags: flags, Commands: []*cli.Command{{Name: "run", Flags: flags}, {Name: "plan", Flags: []cli.Flag{&cli.StringFlag{Name: "nnodes"}}}}}
	for _, tc := range []struct{ in, want []string }{
		{[]string{"p", "--nnode=2", "train.py", "--nnode=3"}, []string{"p", "--nnodes=2", "train.py", "--nnode=3"}},
		{[]string{"p", "run", "--nproc_per", "2", "--max-re", "1", "train.py"}, []string{"p", "run", "--nproc_per_node", "2", "--max-restarts", "1", "train.py"}},
		{[]string{"p", "--no-p", "train.py"}, []string{"p", "--no-python", "train.py"}},
		{[]string{"p", "--no", "train.py"}, []string{"p", "--no", "train.py"}},                 // ambiguous: the parser refuses it
		{[]string{"p", "--nnodes", "--nn", "x.py"}, []string{"p", "--nnodes", "--nn", "x.py"}}, // a value, not a flag
		{[]string{"p", "plan", "--nnode", "2"}, []string{"p", "plan", "--nnode", "2"}},         // not a launch line
		{[]string{"p", "--", "--nnode=2"}, []string{"p", "--", "--nnode=2"}},
	} {
		if got := ExpandAbbreviations(app, tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ExpandAbbreviations(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
