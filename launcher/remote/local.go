package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// LocalHostName is how a local job's host is named in errors from its
// agent.
const LocalHostName = "this machine"

// IsThisMachine reports whether target is the machine we run on, reached
// as ourselves on sshd's default port: its address (after ~/.ssh/config's
// HostName) is loopback, this machine's host name (or its short form), or
// one of this machine's interface addresses. A port of its own (a
// container behind a forwarded port) or another login is another host,
// reached over SSH. Nothing is looked up in DNS.
func IsThisMachine(target HostTarget, opts SSHOptions) bool {
	r, err := resolveTarget(target, opts)
	if err != nil || r.Port != 22 || r.User != currentUser() {
		return false
	}
	addr := strings.ToLower(strings.Trim(r.Addr, "[]"))
	if addr == "localhost" || strings.HasSuffix(addr, ".localhost") {
		return true
	}
	if ip := net.ParseIP(addr); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	own, err := os.Hostname()
	if err != nil || own == "" {
		return false
	}
	own = strings.ToLower(own)
	short := func(s string) string { h, _, _ := strings.Cut(s, "."); return h }
	// "gpu7" names "gpu7.cluster" and the other way round; two full
	// names must match.
	return addr == own || ((!strings.Contains(addr, ".") || !strings.Contains(own, ".")) && short(addr) == short(own))
}

// StartLocal starts cmd on this machine with /bin/sh -c, as sshd would
// start it, with stdin piped: the local counterpart of Conn.Start (a job
// whose only host is this machine runs its agent so). Its stderr's end is
// kept for its ExitError.
func StartLocal(cmd string, stdout, stderr io.Writer) (*LocalSession, error) {
	c := exec.Command("/bin/sh", "-c", cmd)
	// Its own process group from the start: a ^C at the terminal reaches
	// us (we stop the ranks), not the agent before its setsid.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &LocalSession{cmd: c, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
	c.Stdout = stdout
	if stderr != nil {
		c.Stderr = io.MultiWriter(stderr, s.stderr)
	} else {
		c.Stderr = s.stderr
	}
	// The agent ends only after every rank and what the ranks left in
	// their sessions has: a process still holding its output after that
	// is not ours to wait for.
	c.WaitDelay = 5 * time.Second
	var err error
	if s.stdin, err = c.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	go s.wait()
	return s, nil
}

// RunLocal runs cmd on this machine with /bin/sh -c to its end; a failure
// carries its output's end.
func RunLocal(ctx context.Context, cmd string) error {
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w%s", err, StderrSuffix(out))
	}
	return nil
}

// LocalSession is a command started by StartLocal, a child of ours; it
// has the methods of an SSH Session.
type LocalSession struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{}
	err    error
}

func (s *LocalSession) wait() {
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		x := &ExitError{Host: LocalHostName, Code: ee.ExitCode(), Stderr: s.stderr.String()}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			x.Code, x.Signal = -1, ws.Signal().String()
		}
		err = x
	}
	s.err = err
	close(s.done)
}

func (s *LocalSession) WriteStdin(p []byte) error {
	_, err := s.stdin.Write(p)
	return err
}

func (s *LocalSession) CloseStdin() error     { return s.stdin.Close() }
func (s *LocalSession) Done() <-chan struct{} { return s.done }

func (s *LocalSession) Wait() error {
	<-s.done
	return s.err
}

// Close gives the agent up: it is killed (an SSH session's Close drops
// the channel, and sshd then hangs the remote command up).
func (s *LocalSession) Close() error {
	s.stdin.Close()
	select {
	case <-s.done:
		return nil
	default:
	}
	return s.cmd.Process.Kill()
}
