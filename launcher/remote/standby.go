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

// Standby is one session that runs a first command to its end and then
// stands by for a second command line, which it reads from its stdin: the
// launch probe and the job's agent in one session per host. Every session
// costs the host a login-shell start (root's runs pyenv on many machines:
// most of what starting a job costs), and the second command depends on
// what the first found (the job is rendered from the probe), so the
// session waits in between instead of ending.
type Standby struct {
	sess   *Session
	host   string
	out    *handoff
	errOut *handoff

	mu    sync.Mutex
	taken bool
}

// standbyScript runs $1 (a shell command line, stdin from /dev/null, so it
// cannot eat the second line) and prints "\nMARK STATUS" on stdout and on
// stderr, then reads one line from stdin and runs it in place of itself
// (the rest of stdin is that command's); EOF instead ends it. read takes
// one byte at a time from a pipe, so nothing past the line is consumed.
const standbyScript = `m=$2
(eval "$1") </dev/null
s=$?
printf '\n%s %s\n' "$m" "$s"
printf '\n%s %s\n' "$m" "$s" >&2
IFS= read -r l || exit 0
eval "$l"`

// StartStandby starts first (a shell command line) on c, standing by for a
// second command afterwards (Standby.Then). The session outlives ctx, as a
// started agent must; First waits for the first command's output.
func (c *Conn) StartStandby(first string) (*Standby, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	mark := "@@pipette-standby-" + hex.EncodeToString(b)
	s := &Standby{host: c.Target.Name, out: newHandoff(mark), errOut: newHandoff(mark)}
	// The login shell may not be POSIX (fish, csh): run it under sh.
	cmd := "exec /bin/sh -c " + shellquote.Join([]string{standbyScript, "sh", first, mark})
	sess, err := c.Start(context.Background(), cmd, s.out, s.errOut)
	if err != nil {
		return nil, err
	}
	s.sess = sess
	return s, nil
}

// First waits for the first command to end and returns its output, as Run
// does: a non-zero exit is an *ExitError. On an error the standby is
// closed.
func (s *Standby) First(ctx context.Context) (stdout, stderr []byte, err error) {
	for _, h := range []*handoff{s.out, s.errOut} {
		select {
		case <-h.marked:
		case <-s.sess.Done():
			select {
			case <-h.marked:
				continue
			default:
			}
			err := s.sess.Wait()
			if err == nil {
				err = fmt.Errorf("session ended before its first command did")
			}
			stdout, stderr = s.out.pending(), s.errOut.pending()
			var ee *ExitError
			if errors.As(err, &ee) {
				ee.Stderr = string(stderr)
			}
			return stdout, stderr, err
		case <-ctx.Done():
			s.Close()
			return nil, nil, fmt.Errorf("%w (the remote command may still be running)", context.Cause(ctx))
		}
	}
	stdout, stderr = s.out.head(), s.errOut.head()
	if code := s.out.status; code != 0 {
		s.Close()
		return stdout, stderr, &ExitError{Host: s.host, Code: code, Stderr: string(stderr)}
	}
	return stdout, stderr, nil
}

// Then runs cmd (one shell line, run by /bin/sh: quote its words with
// shellquote) in the standby's place once First has returned without an
// error; what it writes goes to stdout and stderr from then on, and its
// stdin is the session's (Session.WriteStdin). A standby runs one second
// command at most.
func (s *Standby) Then(cmd string, stdout, stderr io.Writer) (*Session, error) {
	if strings.ContainsAny(cmd, "\n\r") {
		return nil, fmt.Errorf("standby: the second command must be one line")
	}
	s.mu.Lock()
	taken := s.taken
	s.taken = true
	s.mu.Unlock()
	if taken {
		return nil, fmt.Errorf("standby: already used")
	}
	select {
	case <-s.out.marked:
	default:
		return nil, fmt.Errorf("standby: its first command has not ended")
	}
	if s.out.status != 0 {
		return nil, fmt.Errorf("standby: its first command failed (exit code %d)", s.out.status)
	}
	s.out.to(stdout)
	s.errOut.to(stderr)
	if err := s.sess.WriteStdin([]byte(cmd + "\n")); err != nil {
		return nil, fmt.Errorf("standby: send the command: %w", err)
	}
	return s.sess, nil
}

// Close ends a standby that was not used (EOF: it exits without running
// anything) and its session.
func (s *Standby) Close() {
	s.mu.Lock()
	taken := s.taken
	s.taken = true
	s.mu.Unlock()
	if !taken {
		s.sess.CloseStdin()
		s.sess.Close()
	}
}

// handoff is a standby's stdout or stderr: it keeps what comes before the
// mark line (the first command's output) and passes what follows to the
// second command's writer once there is one.
type handoff struct {
	mark   string
	marked chan struct{} // closed once the mark line arrived

	mu      sync.Mutex
	buf     bytes.Buffer // before the mark; after it, until w is set
	first   []byte
	status  int // the first command's exit status (read after marked)
	w       io.Writer
	isFirst bool
	tail    io.Writer // the session's stderr tail (stderr only), fed after the mark
}

// tailFeeder is a stderr writer that feeds the session's tail itself.
type tailFeeder interface{ feedTail(t *tailBuffer) }

func (h *handoff) feedTail(t *tailBuffer) {
	h.mu.Lock()
	h.tail = t
	h.mu.Unlock()
}

func newHandoff(mark string) *handoff {
	return &handoff{mark: mark, marked: make(chan struct{}), isFirst: true}
}

func (h *handoff) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		if h.tail != nil {
			_, _ = h.tail.Write(p)
		}
		return h.w.Write(p)
	}
	h.buf.Write(p)
	if !h.isFirst {
		return len(p), nil
	}
	// The mark follows a newline of its own (printf '\n...'), which is not
	// the first command's output.
	b := h.buf.Bytes()
	i := bytes.Index(b, []byte("\n"+h.mark+" "))
	if i < 0 {
		return len(p), nil
	}
	rest := b[i+1+len(h.mark)+1:]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return len(p), nil
	}
	code, err := strconv.Atoi(string(rest[:nl]))
	if err != nil {
		code = 255
	}
	h.first = append([]byte(nil), b[:i]...)
	h.status = code
	after := append([]byte(nil), rest[nl+1:]...)
	h.buf.Reset()
	h.buf.Write(after)
	h.isFirst = false
	close(h.marked)
	return len(p), nil
}

// pending is what came and was not passed on (the whole output of a
// session that ended before the mark).
func (h *handoff) pending() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]byte(nil), h.buf.Bytes()...)
}

// head is the first command's output (after marked).
func (h *handoff) head() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// to sends what comes after the mark to w (nil: discarded), starting with
// what already came.
func (h *handoff) to(w io.Writer) {
	if w == nil {
		w = io.Discard
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buf.Len() > 0 {
		if h.tail != nil {
			_, _ = h.tail.Write(h.buf.Bytes())
		}
		_, _ = w.Write(h.buf.Bytes())
		h.buf.Reset()
	}
	h.w = w
}
