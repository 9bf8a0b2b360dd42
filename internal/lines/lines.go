// Package lines reads text line by line with a bound on each line: the one
// way the project reads output and logs it does not control (ranks' output
// as it streams in, pods' logs, training logs), where one line can be
// megabytes (a progress bar without newlines, a printed tensor) and
// bufio.Scanner would stop at it with "token too long".
//
// A Writer splits what is written to it (a session's stdout) into lines;
// Each does the same for a reader. Both cut a line the same way: its
// first max bytes are kept, the rest counted and dropped, and the reading
// goes on.
package lines

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// Max is the bound the project puts on one line of output or log
// (docs/usage.md): longer than any line a launch or a log parser reads
// for its meaning, short enough that a rank printing without newlines
// cannot exhaust memory.
const Max = 64 << 10

// Func is called with each line, without its "\n" (and a "\r" before it).
// dropped is how many bytes were cut from the line's end (0: it came
// whole). line is valid only during the call.
type Func func(line []byte, dropped int64)

// Writer calls its Func for each line written to it. Memory stays within
// max bytes whatever is written. It is safe for concurrent writes (each
// Write is taken whole), and its Write never fails.
type Writer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int64
	fn      Func
}

// NewWriter returns a Writer that hands each line to fn, cut at bound
// bytes (at least 1).
func NewWriter(bound int, fn Func) *Writer {
	return &Writer{max: max(bound, 1), fn: fn}
}

// Write splits p into lines; a line not yet ended by "\n" is kept (up to
// max bytes) for the next Write or Flush.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		part := p
		if i >= 0 {
			part, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		w.keep(part)
		if i >= 0 {
			w.emit()
		}
	}
	return n, nil
}

// Flush hands on the line under way, if any: the last line of output
// that ended without a newline (the process that wrote it has exited).
func (w *Writer) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 || w.dropped > 0 {
		w.emit()
	}
}

// keep adds part to the line under way, up to max bytes; the rest is
// counted as dropped.
func (w *Writer) keep(part []byte) {
	take := min(len(part), w.max-len(w.buf))
	// A "\r" cut off with the end of the line is a byte dropped like any
	// other: the count says what the line really had.
	w.dropped += int64(len(part) - take)
	if need := len(w.buf) + take; need > cap(w.buf) {
		// Grown by hand: append's doubling would pass max.
		w.buf = append(make([]byte, 0, min(max(2*cap(w.buf), need), w.max)), w.buf...)
	}
	w.buf = append(w.buf, part[:take]...)
}

func (w *Writer) emit() {
	line := w.buf
	if w.dropped == 0 {
		line = bytes.TrimSuffix(line, []byte("\r"))
	}
	w.fn(line, w.dropped)
	w.buf, w.dropped = w.buf[:0], 0
}

// Each calls fn with each line of r, cut at bound bytes as a Writer cuts
// it. A last line without a newline is a line. The error is r's, never
// io.EOF.
func Each(r io.Reader, bound int, fn Func) error {
	w := NewWriter(bound, fn)
	_, err := io.Copy(w, r)
	w.Flush() // what was read before an error is still a line
	return err
}

// Shown is line as the project prints it: with a note of how much of it
// was cut, so a reader knows the line went on.
func Shown(line []byte, dropped int64) string {
	if dropped == 0 {
		return string(line)
	}
	return fmt.Sprintf("%s [pipette-launch: %d more bytes of this line not shown]", line, dropped)
}
