package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
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
	// run runs a one-off command line to its end (the stop command); an
	// *unreachableError when the host's connection is lost.
	run(ctx context.Context, cmd string) error
	// lost is why the host's connection is lost (never dialled again), nil
	// while it is up.
	lost() error
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
	conn *remote.Conn
	// standby, when not nil, is a session standing by on conn (the launch
	// probe's): start runs cmd there instead of in a session of its own.
	standby *remote.Standby
}

func (t sshTransport) start(cmd string, stdout, stderr io.Writer) (agentSession, error) {
	if t.standby != nil {
		if sess, err := t.standby.Then(cmd, stdout, stderr); err == nil {
			return sess, nil
		}
		// Gone (a dropped session, a failed first command): a fresh
		// session says why, if the connection is gone too.
		t.standby.Close()
	}
	sess, err := t.conn.Start(context.Background(), cmd, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// unreachableError: the stop command could not even be sent.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return e.err.Error() }

// run does not dial a lost host again: a cut host would hold the stop (or
// the removal of the job's files) for the connect timeout, and its agent
// stops its ranks and removes the files itself (leftToAgentError).
func (t sshTransport) run(ctx context.Context, cmd string) error {
	if err := t.lost(); err != nil {
		return &unreachableError{err}
	}
	_, _, err := t.conn.Run(ctx, cmd)
	return err
}

func (t sshTransport) lost() error {
	if t.conn == nil {
		return remote.ErrConnLost // the pool's connection was lost
	}
	return t.conn.Err()
}

func (t sshTransport) keepAlive(sess agentSession, timeout time.Duration) {
	remote.Heartbeat(t.conn, sess, timeout)
}

func (t sshTransport) heartbeats() bool { return true }

// localTransport is this machine: the agent is a child process of ours
// started by /bin/sh, as sshd would start it (the same command line). Its
// stdin is our pipe: when we end, however we end, the kernel closes it and
// the agent's watchdog stops the ranks, so no heartbeat is needed.
type localTransport struct{}

func (localTransport) start(cmd string, stdout, stderr io.Writer) (agentSession, error) {
	s, err := remote.StartLocal(cmd, stdout, stderr)
	if err != nil {
		return nil, fmt.Errorf("start the agent: %w", err)
	}
	return s, nil
}

func (localTransport) run(ctx context.Context, cmd string) error { return remote.RunLocal(ctx, cmd) }

func (localTransport) lost() error { return nil }

func (localTransport) keepAlive(agentSession, time.Duration) {}

func (localTransport) heartbeats() bool { return false }

// launchLocal is Launch on this machine without SSH: the job's files are
// written here, and the agent, the very one SSH starts, runs as our child.
func launchLocal(ctx context.Context, job job.Job, opts Options) error {
	if len(job.Hosts) != 1 {
		return fmt.Errorf("job %s: a local launch runs one host (this machine), not %d", job.Name, len(job.Hosts))
	}
	if job.WorkDir == "" {
		job.WorkDir = DefaultWorkDir(job.Name)
	}
	defer removeFiles(ctx, job, opts, remote.RunLocal)
	targets := []remote.HostTarget{{Name: job.Hosts[0].Name, User: job.Hosts[0].User, Port: job.Hosts[0].Port}}
	return runAttempts(ctx, job, opts, func(out *output, attempt int) error {
		// Each attempt's: an agent its watchdog stopped removed them.
		if err := writeFilesLocal(job); err != nil {
			return fmt.Errorf("job %s: %w", job.Name, err)
		}
		_, err := runAgents(ctx, job, targets, []transport{localTransport{}}, eachInTurn, opts, out, attempt)
		return err
	})
}

// writeFilesLocal writes the job's files where an SSH launch uploads them
// (remoteFilePath): the job's private files directory (privateDirLocal),
// never the launch directory, which holds the user's own
// files (a generated ds_config.json or hostfile must not replace theirs);
// each complete or not at all (a temp file renamed into place), as Upload does.
func writeFilesLocal(job job.Job) error {
	if root := job.FilesRoot(); root != "" && len(job.Files) > 0 {
		if err := privateDirLocal(filepath.FromSlash(root)); err != nil {
			return err
		}
	}
	for _, f := range job.Files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		dst := filepath.FromSlash(remoteFilePath(job, f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := atomicfile.Write(dst, f.Content, fsMode(mode)); err != nil {
			return fmt.Errorf("job file %s: %w", f.Path, err)
		}
	}
	return nil
}

// privateDirLocal creates dir private (mode 0700, parents too) and
// refuses unless it is then a real directory owned by this user that no
// one else can write (atomicfile.OwnDir), as job.PrivateDirScript does on
// a remote host: on a shared /tmp another user could have made the path
// (or a symlink there) first.
func privateDirLocal(dir string) error {
	err := atomicfile.OwnDir(dir, false)
	var de *atomicfile.DirError
	if errors.As(err, &de) {
		return fmt.Errorf("job files directory %s is not a directory of this user that only this user can write (it %s): remove it or choose another with --output-dir", dir, de.Why)
	}
	if err != nil {
		return fmt.Errorf("job files directory: %w", err)
	}
	return nil
}

// eachInTurn runs fn for each target in turn, collecting failures per
// host as Pool.Each does.
func eachInTurn(ctx context.Context, targets []remote.HostTarget, fn func(ctx context.Context, t remote.HostTarget) error) error {
	errs := &remote.HostErrors{}
	for _, t := range targets {
		if err := fn(ctx, t); err != nil {
			errs.Add(remote.ErrorName(t), err)
		}
	}
	return errs.ErrorOrNil()
}
