package launchline

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// readLine parses args (launcher flags, then the script) as run does.
func readLine(t *testing.T, args ...string) (*Line, error) {
	t.Helper()
	var line *Line
	var readErr error
	app := &cli.App{
		Flags: append(append(Flags(), IgnoredLauncherFlags()...), &cli.StringFlag{Name: "cluster"}),
		Action: func(c *cli.Context) error {
			line, readErr = Read(c, nil)
			return nil
		},
	}
	if err := app.Run(append([]string{"pipette-launch"}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return line, readErr
}

// TestParseNNodes (issue 30): torchrun's MIN:MAX is an elastic range;
// MIN above MAX is refused, naming both.
func TestParseNNodes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Nodes
		elastic bool
		err     string
	}{
		{"", Nodes{}, false, ""},
		{"4", Nodes{4, 4}, false, ""},
		{"2:2", Nodes{2, 2}, false, ""},
		{"1:4", Nodes{1, 4}, true, ""},
		{"3:2", Nodes{}, false, `--nnodes "3:2": MIN 3 is above MAX 2`},
		{"1:", Nodes{}, false, `MAX "" is not a number of hosts`},
		{"0:4", Nodes{}, false, "want a number of hosts from 1"},
		{"x", Nodes{}, false, "want a number of hosts from 1"},
	} {
		got, err := ParseNNodes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseNNodes(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || got.Elastic() != tc.elastic {
			t.Errorf("ParseNNodes(%q) = %v (elastic %v), %v; want %v (elastic %v)", tc.in, got, got.Elastic(), err, tc.want, tc.elastic)
		}
	}
}

// TestDeepSpeedElasticFlags (issue 30): DeepSpeed's --elastic_training
// --min_elastic_nodes --max_elastic_nodes become --nnodes MIN:MAX with
// DeepSpeed's defaults (MIN 1, MAX --num_nodes) and its elastic agent's
// 100 restarts; they are no longer ignored.
func TestDeepSpeedElasticFlags(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		nnodes   string
		restarts int
		err      string
	}{
		{[]string{"--elastic_training", "--min_elastic_nodes", "2", "--max_elastic_nodes", "4"}, "2:4", 100, ""},
		{[]string{"--elastic_training", "--num_nodes", "3"}, "1:3", 100, ""},
		{[]string{"--elastic_training", "--num_nodes", "2:3", "--max_restarts", "5"}, "2:3", 5, ""},
		{[]string{"--elastic_training", "--min_elastic_nodes", "4", "--max_elastic_nodes", "2"}, "", 0, "--min_elastic_nodes 4 above --max_elastic_nodes 2"},
		{[]string{"--min_elastic_nodes", "2"}, "", 0, "--min_elastic_nodes needs --elastic_training"},
		{[]string{"--elastic_training", "--no_local_rank"}, "", 0, "--no_local_rank cannot be combined with --elastic_training"},
	} {
		l, err := readLine(t, append(tc.args, "train.py")...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err = %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || l.NNodes != tc.nnodes || l.MaxRestarts != tc.restarts || l.Style != StyleDeepSpeed || len(l.Ignored) != 0 {
			t.Errorf("%v: nnodes %q restarts %d style %q ignored %v, %v; want %q, %d, deepspeed, none", tc.args, l.NNodes, l.MaxRestarts, l.Style, l.Ignored, err, tc.nnodes, tc.restarts)
		}
	}
}
