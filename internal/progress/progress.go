// Package progress shows how far a long step (probing, measuring) is on
// the user's terminal or log.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Line shows how far a long step is. On a terminal it rewrites one line
// in place; elsewhere (logs, CI) it prints each distinct message on its own
// line. A nil *Line shows nothing.
type Line struct {
	w    io.Writer
	tty  bool
	mu   sync.Mutex
	last string
}

// New writes progress to w, in place when w is a terminal.
func New(w io.Writer) *Line {
	return &Line{w: w, tty: isTerminal(w)}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Update shows a new status message.
func (p *Line) Update(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if msg == p.last {
		return
	}
	p.last = msg
	if p.tty {
		// \r back to column 0, ESC[K clears what a longer line left behind.
		fmt.Fprintf(p.w, "\r\x1b[K%s", msg)
		return
	}
	fmt.Fprintln(p.w, msg)
}

// Done ends the in-place line so later output starts on a fresh one.
func (p *Line) Done() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.last != "" {
		fmt.Fprintln(p.w)
	}
	p.last = ""
}
