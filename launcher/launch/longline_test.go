package launch

import (
	"bytes"
	"strings"
	"testing"
)

// TestLineSplitterCutsLongLines (issue 31): a 20 MB line of a rank's
// output is handed on once, cut at maxLine with a note, so it keeps its
// rank prefix ("3 ..."); the next line comes whole. Written in pieces of
// any size, as a session delivers it.
func TestLineSplitterCutsLongLines(t *testing.T) {
	in := append(append([]byte("3 "), bytes.Repeat([]byte("x"), 20<<20)...), []byte("\n3 next\n2 a\n")...)
	for _, piece := range []int{1 << 20, 4096, 65537} {
		var got []string
		s := &lineSplitter{fn: func(l string) { got = append(got, l) }}
		for p := in; len(p) > 0; {
			n := min(piece, len(p))
			if w, err := s.Write(p[:n]); w != n || err != nil {
				t.Fatalf("Write = %d, %v; want %d", w, err, n)
			}
			p = p[n:]
		}
		s.flush()
		if len(got) != 3 || !strings.HasPrefix(got[0], "3 xxx") || len(got[0]) != maxLine+len(cutNote) ||
			!strings.HasSuffix(got[0], cutNote) || got[1] != "3 next" || got[2] != "2 a" {
			t.Errorf("pieces of %d: %d lines (the first %d bytes); want the cut line, \"3 next\", \"2 a\"", piece, len(got), len(got[0]))
		}
	}
}
