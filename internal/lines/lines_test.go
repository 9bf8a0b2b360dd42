package lines

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

type got struct {
	line    string
	dropped int64
}

func collect(t *testing.T, r io.Reader, bound int) []got {
	t.Helper()
	var out []got
	if err := Each(r, bound, func(l []byte, d int64) { out = append(out, got{string(l), d}) }); err != nil {
		t.Fatal(err)
	}
	return out
}

// written is what a Writer hands on when in is written in pieces of the
// given size and then flushed, as a session delivers a process's output.
func written(t *testing.T, in []byte, bound, piece int) []got {
	t.Helper()
	var out []got
	w := NewWriter(bound, func(l []byte, d int64) { out = append(out, got{string(l), d}) })
	for p := in; len(p) > 0; {
		n := min(piece, len(p))
		if k, err := w.Write(p[:n]); k != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d", k, err, n)
		}
		p = p[n:]
	}
	w.Flush()
	return out
}

var eachCases = []struct {
	in   string
	want []got
}{
	{"a\nb\r\n\nc", []got{{"a", 0}, {"b", 0}, {"", 0}, {"c", 0}}},
	{strings.Repeat("x", 100) + "\nafter\n", []got{{strings.Repeat("x", 16), 84}, {"after", 0}}},
	{strings.Repeat("x", 100), []got{{strings.Repeat("x", 16), 84}}},
	{strings.Repeat("y", 16) + "\nz\n", []got{{strings.Repeat("y", 16), 0}, {"z", 0}}},
	// The "\r" of a line that fits is not part of it; one past the bound
	// is a dropped byte.
	{strings.Repeat("r", 15) + "\r\n", []got{{strings.Repeat("r", 15), 0}}},
	{strings.Repeat("r", 16) + "\r\n", []got{{strings.Repeat("r", 16), 1}}},
	{"a\nb", []got{{"a", 0}, {"b", 0}}},
	{"", nil},
}

// TestEach: lines come without their newline, a long line is cut to the
// bound with the dropped count, and the lines after it still come,
// whether the reader hands over the input at once or one byte at a time.
func TestEach(t *testing.T) {
	for _, c := range eachCases {
		for name, r := range map[string]io.Reader{"whole": strings.NewReader(c.in), "bytewise": iotest.OneByteReader(strings.NewReader(c.in))} {
			if g := collect(t, r, 16); fmt.Sprint(g) != fmt.Sprint(c.want) {
				t.Errorf("%s %.20q: got %v; want %v", name, c.in, g, c.want)
			}
		}
	}
}

// TestWriter: the same lines when the input is written in pieces of any
// size, a line split across writes (the "b" of "a\nb" then "c\n\nd")
// joined, and the last line without a newline handed on by Flush.
func TestWriter(t *testing.T) {
	for _, c := range eachCases {
		for _, piece := range []int{1, 3, 16, 17, 1 << 10} {
			if g := written(t, []byte(c.in), 16, piece); fmt.Sprint(g) != fmt.Sprint(c.want) {
				t.Errorf("pieces of %d, %.20q: got %v; want %v", piece, c.in, g, c.want)
			}
		}
	}
	var out []string
	w := NewWriter(16, func(l []byte, _ int64) { out = append(out, string(l)) })
	w.Write([]byte("a\nb"))
	w.Write([]byte("c\n\nd"))
	if got := strings.Join(out, "|"); got != "a|bc|" {
		t.Errorf("before Flush: %q; want \"a|bc|\" (d is not a line yet)", got)
	}
	w.Flush()
	w.Flush() // nothing left: no second "d", no empty line
	if got := strings.Join(out, "|"); got != "a|bc||d" {
		t.Errorf("lines = %q; want \"a|bc||d\"", got)
	}
}

// TestWriterHugeLine (issue 31): a 20 MB line of a rank's output, written
// in pieces of any size, is handed on once, cut at Max, and the next lines
// come whole; the Writer never holds more than Max bytes.
func TestWriterHugeLine(t *testing.T) {
	in := append(append([]byte("3 "), bytes.Repeat([]byte("x"), 20<<20)...), []byte("\n3 next\n2 a\n")...)
	for _, piece := range []int{1 << 20, 4096, 65537} {
		var out []got
		w := NewWriter(Max, func(l []byte, d int64) { out = append(out, got{string(l), d}) })
		for p := in; len(p) > 0; p = p[min(piece, len(p)):] {
			w.Write(p[:min(piece, len(p))])
			if cap(w.buf) > Max {
				t.Fatalf("pieces of %d: the Writer holds %d bytes; want at most %d", piece, cap(w.buf), Max)
			}
		}
		w.Flush()
		if len(out) != 3 || len(out[0].line) != Max || !strings.HasPrefix(out[0].line, "3 xxx") || out[0].dropped != 20<<20+2-Max ||
			out[1] != (got{"3 next", 0}) || out[2] != (got{"2 a", 0}) {
			t.Errorf("pieces of %d: %d lines (the first %d bytes, %d dropped); want the cut line, \"3 next\", \"2 a\"", piece, len(out), len(out[0].line), out[0].dropped)
		}
	}
}

// TestWriterConcurrent: writes from two goroutines (a session's stdout
// copied while another goroutine flushes at its end) are each taken whole.
func TestWriterConcurrent(t *testing.T) {
	var mu sync.Mutex
	n := 0
	w := NewWriter(16, func(l []byte, _ int64) {
		mu.Lock()
		defer mu.Unlock()
		if string(l) != "line" {
			t.Errorf("line %q; want \"line\"", l)
		}
		n++
	})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				w.Write([]byte("line\n"))
			}
		}()
	}
	wg.Wait()
	w.Flush()
	if n != 2000 {
		t.Errorf("%d lines; want 2000", n)
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

// TestEachError: the reader's error comes back, after the line it cut
// short.
func TestEachError(t *testing.T) {
	var out []string
	err := Each(io.MultiReader(strings.NewReader("a\npart"), iotest.ErrReader(io.ErrUnexpectedEOF)), 16, func(l []byte, _ int64) { out = append(out, string(l)) })
	if err != io.ErrUnexpectedEOF || strings.Join(out, "|") != "a|part" {
		t.Errorf("Each = %v with lines %q; want the reader's error after \"a|part\"", err, out)
	}
}

func TestShown(t *testing.T) {
	for _, c := range []struct {
		line    string
		dropped int64
		want    string
	}{
		{"3 loss 1.5", 0, "3 loss 1.5"},
		{"3 xxx", 20 << 20, "3 xxx [pipette-launch: 20971520 more bytes of this line not shown]"},
	} {
		if got := Shown([]byte(c.line), c.dropped); got != c.want {
			t.Errorf("Shown(%q, %d) = %q; want %q", c.line, c.dropped, got, c.want)
		}
	}
}
