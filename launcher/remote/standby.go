package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

// Standby is a session that ran a first command and stands by for a second
// command line on its stdin (Pool.RunStandingBy, Then): the launch probe
// and the job's agent in one session, so one login-shell start per host
// (root's runs pyenv on many machines: most of what a start costs).
type Standby struct {
	sess *Session
	out  *handoff // stdout: the first command's output up to the mark line
	err  *handoff // stderr: kept until Then (for errors), then passed on
	used sync.Once
}

// standbyScript runs $1 (stdin from /dev/null: it must not eat the second
// line), prints "\nMARK STATUS" on stdout, then reads one line from stdin
// and runs it in its own place (the rest of stdin is that command's); EOF
// ends it. read takes a pipe byte by byte: nothing past the line is used.
const standbyScript = `(eval "$1") </dev/null; printf '\n%s %s\n' "$2" "$?"; IFS= read -r l || exit 0; eval "$l"`

// runStandingBy runs first (a shell command line) on c as Run does (a
// non-zero exit is an *ExitError), in a session that outlives ctx, as a
// started agent must, and that stands by once first succeeded.
func (c *Conn) runStandingBy(ctx context.Context, first string) (stdout, stderr []byte, s *Standby, err error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := "@@pipette-standby-" + hex.EncodeToString(b)
	s = &Standby{out: &handoff{mark: []byte("\n" + mark + " "), marked: make(chan struct{})}, err: &handoff{}}
	// The login shell may not be POSIX (fish, csh): run it under sh.
	cmd := "exec /bin/sh -c " + shellquote.Join([]string{standbyScript, "sh", first, mark})
	if s.sess, err = c.Start(context.Background(), cmd, s.out, s.err); err != nil {
		return nil, nil, nil, err
	}
	select {
	case <-s.out.marked:
		if s.out.status == 0 {
			return s.out.first, s.err.held(), s, nil
		}
		err = &ExitError{Host: c.Target.Name, Code: s.out.status}
	case <-s.sess.Done():
		if err = s.sess.Wait(); err == nil {
			err = fmt.Errorf("session ended before its first command did")
		}
	case <-ctx.Done():
		err = fmt.Errorf("%w (the remote command may still be running)", context.Cause(ctx))
	}
	s.Close() // EOF ends it: then all its stderr is here
	select {
	case <-s.sess.Done():
	case <-ctx.Done():
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		ee.Stderr = string(s.err.held())
	}
	return s.out.first, s.err.held(), nil, err
}

// Then runs cmd (one shell line for /bin/sh: quote its words with
// shellquote) in the standby's place; what it writes goes to stdout and
// stderr, and its stdin is the returned session's. A standby runs one
// second command at most, and none once closed.
func (s *Standby) Then(cmd string, stdout, stderr io.Writer) (*Session, error) {
	ok := false
	s.used.Do(func() { ok = !strings.ContainsAny(cmd, "\n\r") })
	if !ok {
		return nil, fmt.Errorf("standby: used, closed, or a command of more than one line")
	}
	s.out.to(stdout)
	s.err.to(stderr)
	if err := s.sess.WriteStdin([]byte(cmd + "\n")); err != nil {
		return nil, fmt.Errorf("standby: send the command: %w", err)
	}
	return s.sess, nil
}

// Close ends a standby not used (EOF: it exits running nothing).
func (s *Standby) Close() {
	s.used.Do(func() {
		s.sess.CloseStdin()
		go func() { <-s.sess.Done(); s.sess.Close() }()
	})
}

// handoff is a standby's stdout or stderr: it holds what comes until Then
// (to), then passes all on. On stdout (mark set) the mark line ends the
// first command's output (first) and gives its status.
type handoff struct {
	mark   []byte
	marked chan struct{}

	mu     sync.Mutex
	buf    bytes.Buffer
	first  []byte
	status int
	w      io.Writer
}

func (h *handoff) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		return h.w.Write(p)
	}
	h.buf.Write(p)
	b := h.buf.Bytes()
	i := bytes.Index(b, h.mark)
	if h.mark == nil || h.first != nil || i < 0 || bytes.IndexByte(b[i+len(h.mark):], '\n') < 0 {
		return len(p), nil
	}
	status, rest, _ := bytes.Cut(b[i+len(h.mark):], []byte("\n"))
	if n, err := strconv.Atoi(string(status)); err == nil {
		h.status = n
	} else {
		h.status = 255
	}
	h.first, rest = append([]byte{}, b[:i]...), append([]byte{}, rest...)
	h.buf.Reset()
	h.buf.Write(rest)
	close(h.marked)
	return len(p), nil
}

// held is what came and was not passed on.
func (h *handoff) held() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte{}, h.buf.Bytes()...)
}

// to passes on what comes from now on to w (nil: discarded): on stdout
// what came after the mark first; on stderr what came before is dropped,
// as a session of its own would not have shown it.
func (h *handoff) to(w io.Writer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w = w; w == nil {
		h.w = io.Discard
	}
	if h.mark != nil {
		_, _ = h.w.Write(h.buf.Bytes())
	}
	h.buf.Reset()
}
