package lines

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type got struct {
	line    string
	dropped int64
}

func collect(t *testing.T, r io.Reader, max int) []got {
	t.Helper()
	var out []got
	if err := Each(r, max, func(l []byte, d int64) { out = append(out, got{string(l), d}) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEach: lines come without their newline, a long line is cut to max
// with the dropped count, and the lines after it still come, whether the
// reader hands over the input at once or one byte at a time.
func TestEach(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, c := range []struct {
		in   string
		want []got
	}{
		{"a\nb\r\n\nc", []got{{"a", 0}, {"b", 0}, {"", 0}, {"c", 0}}},
		{long + "\nafter\n", []got{{long[:16], 84}, {"after", 0}}},
		{long, []got{{long[:16], 84}}},
		{strings.Repeat("y", 16) + "\nz\n", []got{{strings.Repeat("y", 16), 0}, {"z", 0}}},
		{"", nil},
	} {
		for name, r := range map[string]io.Reader{"whole": strings.NewReader(c.in), "bytewise": iotest.OneByteReader(strings.NewReader(c.in))} {
			if g := collect(t, r, 16); fmt.Sprint(g) != fmt.Sprint(c.want) {
				t.Errorf("%s %.20q: got %v; want %v", name, c.in, g, c.want)
			}
		}
	}
}

// TestEachHugeLine: a 20 MB line (the issue's) is one cut line, and the
// iteration line after it is read.
func TestEachHugeLine(t *testing.T) {
	in := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte("z"), 20<<20)), strings.NewReader("\niteration 1\n"))
	g := collect(t, in, 64<<10)
	if len(g) != 2 || len(g[0].line) != 64<<10 || g[0].dropped != 20<<20-64<<10 || g[1].line != "iteration 1" {
		t.Fatalf("got %d lines (first %d bytes, %d dropped); want the cut line and \"iteration 1\"", len(g), len(g[0].line), g[0].dropped)
	}
}

func TestEachError(t *testing.T) {
	err := Each(iotest.ErrReader(io.ErrUnexpectedEOF), 16, func([]byte, int64) {})
	if err != io.ErrUnexpectedEOF {
		t.Errorf("Each = %v; want the reader's error", err)
	}
}
