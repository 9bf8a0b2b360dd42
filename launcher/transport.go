package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// A transport reaches one host of a job to start its agent and to run the
// stop command there: over SSH (a pool's connection), or on this very
// machine without SSH (a job whose only host is this machine, torchrun's
// way). Everything else (the agent script, its control lines, supervision,
// output, the failure summary, stopping, restarts) is the same for both;
// Slurm has its own attempt (one srun step for all hosts) around the same
// agent and supervisor.
type transport interface {
	// start runs cmd (a /bin/sh command line) with stdin piped; it must
	// outlive any caller's context: stopping goes through it.
	start(cmd string, stdout, stderr io.Writer) (agentSession, error)
	// run runs a one-off command line to its end (the stop command).
	run(ctx context.Context, cmd string) error
	// keepAlive keeps the host and us in touch while sess lasts, timeout
	// being the silence after which either side gives the other up;
	// heartbeats reports whether it does (the agent's watchdog then
	// expects a byte at least every timeout).
	keepAlive(sess agentSession, timeout time.Duration)
	heartbeats() bool
}

// agentSession is a started agent: an SSH session or a local process.
type agentSession interface {
	WriteStdin(p []byte) error
	CloseStdin() error
	Done() <-chan struct{}
	Wait() error
	Close() error
}

// sshTransport is a host reached over the launch's SSH connection.
type sshTransport struct {
	conn   *Conn
	target HostTarget
	opts   SSHOptions
}

func (t sshTransport) start(cmd string, stdout, stderr io.Writer) (agentSession, error) {
	sess, err := t.conn.Start(context.Background(), cmd, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// unreachableError: the stop command could not even be sent.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

func (t sshTransport) run(ctx context.Context, cmd string) error {
	c := t.conn
	if c.Err() != nil {
		// The connection that started the ranks is gone; a new one may
		// still get through (sshd restarted, a network blip).
		nc, err := Dial(ctx, t.target, t.opts)
		if err != nil {
			return &unreachableError{err}
		}
		defer nc.Close()
		c = nc
	}
	_, _, err := c.Run(ctx, cmd)
	return err
}

func (t sshTransport) keepAlive(sess agentSession, timeout time.Duration) {
	heartbeat(t.conn, sess, timeout)
}

func (t sshTransport) heartbeats() bool { return true }

// localTransport is this machine: the agent is a child process of ours
// started by /bin/sh, as sshd would start it (the same command line). Its
// stdin is our pipe: when we end, however we end, the kernel closes it and
// the agent's watchdog stops the ranks, so no heartbeat is needed.
type localTransport struct{}

func (localTransport) start(cmd string, stdout, stderr io.Writer) (agentSession, error) {
	c := exec.Command("/bin/sh", "-c", cmd)
	// Its own process group from the start: a ^C at the terminal reaches
	// us (we stop the ranks), not the agent before its setsid.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &localSession{cmd: c, stderr: &tailBuffer{max: 4096}, done: make(chan struct{})}
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
		return nil, fmt.Errorf("start the agent: %w", err)
	}
	go s.wait()
	return s, nil
}

func (localTransport) run(ctx context.Context, cmd string) error {
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w%s", err, stderrSuffix(out))
	}
	return nil
}

func (localTransport) keepAlive(agentSession, time.Duration) {}

func (localTransport) heartbeats() bool { return false }

// localSession is the agent running as our child.
type localSession struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tailBuffer
	done   chan struct{}
	err    error
}

func (s *localSession) wait() {
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

func (s *localSession) WriteStdin(p []byte) error {
	_, err := s.stdin.Write(p)
	return err
}

func (s *localSession) CloseStdin() error     { return s.stdin.Close() }
func (s *localSession) Done() <-chan struct{} { return s.done }

func (s *localSession) Wait() error {
	<-s.done
	return s.err
}

// Close gives the agent up: it is killed (an SSH session's Close drops
// the channel, and sshd then hangs the remote command up).
func (s *localSession) Close() error {
	s.stdin.Close()
	select {
	case <-s.done:
		return nil
	default:
	}
	return s.cmd.Process.Kill()
}

// launchLocal is Launch on this machine without SSH: the job's files are
// written here, and the agent, the very one SSH starts, runs as our child.
func launchLocal(ctx context.Context, job job.Job, opts LaunchOptions) error {
	if len(job.Hosts) != 1 {
		return fmt.Errorf("job %s: a local launch runs one host (this machine), not %d", job.Name, len(job.Hosts))
	}
	if job.WorkDir == "" {
		job.WorkDir = DefaultWorkDir(job.Name)
	}
	if err := writeFilesLocal(job); err != nil {
		return fmt.Errorf("job %s: %w", job.Name, err)
	}
	targets := []HostTarget{{Name: job.Hosts[0].Name, User: job.Hosts[0].User, Port: job.Hosts[0].Port}}
	return runAttempts(ctx, job, opts, func(out *output, attempt int) error {
		return runAgents(ctx, job, targets, []transport{localTransport{}}, eachInTurn, opts, out, attempt)
	})
}

// writeFilesLocal writes the job's files into its work directory, each
// complete or not at all (a temp file renamed into place), as Upload does.
func writeFilesLocal(job job.Job) error {
	for _, f := range job.Files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		dst := filepath.Join(job.WorkDir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := atomicfile.Write(dst, f.Content, fsMode(mode)); err != nil {
			return fmt.Errorf("job file %s: %w", f.Path, err)
		}
	}
	return nil
}

// eachInTurn runs fn for each target in turn, collecting failures per
// host as Pool.Each does.
func eachInTurn(ctx context.Context, targets []HostTarget, fn func(ctx context.Context, t HostTarget) error) error {
	errs := &HostErrors{}
	for _, t := range targets {
		if err := fn(ctx, t); err != nil {
			errs.Add(errorName(t), err)
		}
	}
	return errs.ErrorOrNil()
}
