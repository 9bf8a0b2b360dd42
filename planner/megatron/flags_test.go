package megatron

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// megatronLMFlags reads the flags Megatron-LM core_v0.19.0 defines, as
// extracted from its own arguments.py (testdata, provenance in its header).
func megatronLMFlags(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open("testdata/megatron-core_v0.19.0-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			flags[line] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(flags) < 500 || !flags["--num-layers"] {
		t.Fatalf("%d flags read, without --num-layers: not Megatron's list", len(flags))
	}
	return flags
}

// The parser's flag table knows only flags Megatron-LM defines (or that a
// named fork defines and Megatron-LM does not), and the flags that mark
// features the planner does not model are Megatron-LM's too.
func TestFlagsAreMegatronLMs(t *testing.T) {
	real := megatronLMFlags(t)
	for name, f := range Flags {
		switch {
		case f.Origin == MegatronLM && !real[name]:
			t.Errorf("%s: Megatron-LM core_v0.19.0 defines no such flag", name)
		case f.Origin != MegatronLM && real[name]:
			t.Errorf("%s is Megatron-LM's own flag, not only %s's", name, f.Origin)
		}
	}
	for _, feat := range unmodelledFeatures {
		for _, name := range feat.flags {
			// --use-tutel is Megatron-DeepSpeed's (arguments.py at f4157bea).
			if name != "--use-tutel" && !strings.HasSuffix(name, "-") && !real[name] {
				t.Errorf("unmodelled feature flag %s: Megatron-LM core_v0.19.0 defines no such flag", name)
			}
		}
	}
}

// Parse reads switches, values, =values and flags it does not know the way
// argparse would, the last occurrence winning.
func TestParseSwitchesAndValues(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		name string
		want string
		has  bool
	}{
		{[]string{"--sequence-parallel", "--num-layers", "4"}, "--num-layers", "4", true},
		{[]string{"--sequence-parallel", "7"}, "--sequence-parallel", "", true},
		{[]string{"--num-layers=8", "--num-layers", "4"}, "--num-layers", "4", true},
		{[]string{"--some-future-flag", "x", "--hidden-size", "64"}, "--some-future-flag", "x", true},
		{[]string{"--micro-batch-size"}, "--micro-batch-size", "", true},
		{[]string{"--data-path", "a", "b"}, "--num-layers", "", false},
	} {
		a := Parse(tc.argv)
		got, has := a.Last(tc.name)
		if got != tc.want || has != tc.has {
			t.Errorf("Parse(%q).Last(%s) = %q, %v; want %q, %v", tc.argv, tc.name, got, has, tc.want, tc.has)
		}
	}
	a := Parse([]string{"--bf16", "--tensor-model-parallel-size", "2", "--foo=1", "--use-distributed-optimizer"})
	if got := a.Without(map[string]bool{"--tensor-model-parallel-size": true, "--foo": true}); strings.Join(got, " ") != "--bf16 --use-distributed-optimizer" {
		t.Errorf("Without = %q", got)
	}
}
