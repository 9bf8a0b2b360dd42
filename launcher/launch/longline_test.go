package launch

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/lines"
)

// TestOutputLinesCutsLongLines (issue 31): a 20 MB line of a rank's
// output is handed on once, cut at lines.Max with a note of what was cut,
// so it keeps its rank prefix ("3 ..."); the next lines come whole, the
// last one (no newline) at Flush. Cutting in pieces of any size is
// internal/lines' TestWriterHugeLine.
func TestOutputLinesCutsLongLines(t *testing.T) {
	var got []string
	w := outputLines(func(l string) { got = append(got, l) })
	w.Write([]byte("3 "))
	w.Write(bytes.Repeat([]byte("x"), 20<<20))
	w.Write([]byte("\n3 next\n2 a"))
	w.Flush()
	note := " [pipette-launch: " + strconv.Itoa(20<<20+2-lines.Max) + " more bytes of this line not shown]"
	if len(got) != 3 || !strings.HasPrefix(got[0], "3 xxx") || len(got[0]) != lines.Max+len(note) ||
		!strings.HasSuffix(got[0], note) || got[1] != "3 next" || got[2] != "2 a" {
		t.Errorf("%d lines (the first %d bytes); want the cut line ending %q, \"3 next\", \"2 a\"", len(got), len(got[0]), note)
	}
}
