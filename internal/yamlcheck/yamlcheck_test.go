package yamlcheck

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type inner struct {
	Size int `yaml:"size"`
}

type doc struct {
	Name   string  `yaml:"name"`
	Count  int     `yaml:"count"`
	Rate   float64 `yaml:"rate"`
	On     bool    `yaml:"on"`
	Items  []inner `yaml:"items"`
	Tagged tagged  `yaml:"tagged"`
}

// tagged has a YAML form of its own: a hook checks it.
type tagged string

func (t *tagged) UnmarshalYAML(n *yaml.Node) error { *t = tagged(n.Value); return nil }

func TestDecode(t *testing.T) {
	hooks := Hooks{reflect.TypeOf(tagged("")): func(w *Walker, n *yaml.Node, path string) {
		if !strings.HasPrefix(n.Value, "t-") {
			w.Bad(n, path, "want t-...")
		}
	}}
	for _, c := range []struct {
		name, in, want string
	}{
		{"good", "name: a\ncount: 2\nrate: 1\non: true\nitems: [{size: 3}]\ntagged: t-x\n", ""},
		{"unknown key", "name: a\ncolor: red\n", `color (line 2, column 1): unknown field "color"; the fields here are name, count, rate, on, items, tagged`},
		{"float in int", "count: 8.5\n", "count (line 1, column 8): got 8.5 (not a whole number); want an integer"},
		{"quoted bool", "on: \"yes\"\n", `on (line 1, column 5): got the string "yes"; want true or false (unquoted)`},
		{"nested, two problems", "items: [{size: x}, {big: 1}]\n", `items[0].size (line 1, column 16): got the string "x"; want an integer; items[1].big (line 1, column 21): unknown field "big"; the fields here are size`},
		{"list for map", "items: [3]\n", "items[0] (line 1, column 9): got 3; want a map with keys size"},
		{"hook", "tagged: u\n", "tagged (line 1, column 9): want t-..."},
		{"syntax", "name: [\n", "yaml: line 1"},
		// Issue 31: .nan in a NIC rate deadlocked the planner; .inf and
		// numbers past float64 are no figure either.
		{"nan", "rate: .nan\n", "rate (line 1, column 7): got .nan; want a finite number"},
		{"inf", "rate: -.Inf\n", "rate (line 1, column 7): got -.Inf; want a finite number"},
		{"overflow", "rate: 1e400\n", "rate (line 1, column 7): got 1e400; too large for a 64-bit float"},
		{"underflow", "rate: 1e-400\n", "rate (line 1, column 7): got 1e-400; too small for a 64-bit float (it reads as 0)"},
	} {
		var d doc
		_, err := Decode([]byte(c.in), &d, hooks)
		if c.want == "" {
			if err != nil || d.Items[0].Size != 3 || d.Tagged != "t-x" {
				t.Errorf("%s: %+v, %v", c.name, d, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v\nwant it to contain %s", c.name, err, c.want)
		}
	}
}

func TestDecodePositionsAndEmpty(t *testing.T) {
	var d doc
	pos, err := Decode([]byte("name: a\nitems:\n  - size: 1\n"), &d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pos["items[0].size"] != "line 3, column 11" || pos["name"] != "line 1, column 7" {
		t.Errorf("positions %v", pos)
	}
	if _, err := Decode([]byte("# nothing\n"), &d, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty document: %v, want ErrEmpty", err)
	}
}
