package corpus

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite each corpus file's converted lines and generated files from its stored script")

// Dir is the corpus, relative to this package.
const Dir = "../testdata/corpus"

// Every corpus line is still, character for character, in the script
// stored from its repository, and converting it (running that script with
// the launcher replaced by a recorder) still gives the recorded converted
// line and generated files.
func TestCorpusConversion(t *testing.T) {
	sources, err := Load(Dir)
	if err != nil {
		t.Fatal(err)
	}
	lines, repos := 0, map[string]bool{}
	for _, s := range sources {
		changed := false
		for i := range s.Lines {
			l := &s.Lines[i]
			lines++
			repos[s.Repository] = true
			x, err := s.Expand(Dir, l)
			if err != nil {
				t.Errorf("%s: %v", s.File, err)
				continue
			}
			if slices.Equal(x.Converted, l.Converted) && mapsEqual(x.Generated, l.Generated) && mapsEqual(x.Exported, l.Exported) {
				continue
			}
			if *update {
				l.Converted, l.Generated, l.Exported, changed = x.Converted, x.Generated, x.Exported, true
				continue
			}
			t.Errorf("%s: line %s: converting the original gives\n  %q\nrecorded:\n  %q\n(generated files equal: %v, exported environment equal: %v; rerun with -update after checking)", s.File, l.Name, x.Converted, l.Converted, mapsEqual(x.Generated, l.Generated), mapsEqual(x.Exported, l.Exported))
		}
		if changed {
			if err := write(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("corpus: %d lines from %d repositories", lines, len(repos))
	if lines < 50 || len(repos) < 10 {
		t.Errorf("corpus has %d lines from %d repositories: want at least 50 from 10", lines, len(repos))
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func write(s *Source) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encoding %s: %w", s.File, err)
	}
	return os.WriteFile(s.File, buf.Bytes(), 0o644)
}
