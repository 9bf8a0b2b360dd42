package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/hostclock"
	"github.com/pipette-launch/pipette-launch/internal/lines"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Options control how a job is started and supervised.
type Options struct {
	SSH    remote.SSHOptions
	Fanout int // hosts driven at once; DefaultFanout when 0
	// Pool reuses connections (e.g. the probe's); Launch dials hosts it
	// lacks and does not close it. When nil Launch uses its own.
	Pool *remote.Pool
	// Out receives every shown output line as "host:rank: line"; nil
	// discards. Launch's own notes (restarts, stop problems) go here too.
	Out io.Writer
	// LogDir, when set, keeps one file per rank: LogDir/<host>.<rank>.log.
	LogDir string
	// LocalRanksFilter shows only these local ranks on Out (like torchrun's
	// --local-ranks-filter); nil shows all. QuietRanks hides these global
	// ranks. Hidden output still goes to LogDir and into failure summaries.
	LocalRanksFilter []int
	QuietRanks       []int
	// Grace is how long ranks get between TERM and KILL (default 10s).
	Grace time.Duration
	// MaxRestarts restarts the whole job up to this many times after a
	// rank fails (not after a cancel or a lost host that cannot be reached).
	MaxRestarts int
	// Restart is the restart this launch begins as, for a caller that
	// restarts the job itself (launcher/elastic starts each attempt as a
	// launch of its own): TORCHELASTIC_RESTART_COUNT counts from it and
	// --log-dir files are appended to. NoRestarts leaves restarting to
	// that caller: a failure returns at once, and MaxRestarts only sets
	// TORCHELASTIC_MAX_RESTARTS.
	Restart    int
	NoRestarts bool
	// Attempt is, for such a caller, the attempts of the job before this
	// launch, those that spent no restart included (launcher/elastic's
	// grow-back restarts: torchrun counts membership changes in no
	// restart count): above 0, --log-dir files are appended to as for
	// Restart, with a line naming the attempt.
	Attempt int
	// Started, when set, is called as each attempt of this launch begins
	// (before its ranks start), restarts included: a caller that watches
	// the job's output attempt by attempt (launcher/elastic's progress
	// watch) starts afresh there.
	Started func(attempt int)
	// StartTimeout bounds how long a host's agent may take to come up
	// (default 30s).
	StartTimeout time.Duration
	// TailLines is how many last output lines of the failed rank the
	// summary shows (default 20).
	TailLines int
	// KeepPythonBuffering leaves PYTHONUNBUFFERED unset; by default it is
	// set to 1 (unless the job sets it) so output streams live and the
	// last lines before a crash are not lost in a buffer.
	KeepPythonBuffering bool
	// Slurm, when set, starts the job as one srun step in that allocation
	// instead of over SSH (SSH, Fanout and Pool are then unused).
	Slurm *remote.Slurm
	// Local runs a one-host job on this machine without SSH, as torchrun
	// does: the same agent, as our child process (SSH, Fanout and Pool are
	// then unused).
	Local bool
	// HeartbeatTimeout: each host's agent stops its ranks (TERM, KILL
	// after Grace) when it hears nothing from us for this long, and a host
	// we hear nothing from for this long is lost (default 30s).
	HeartbeatTimeout time.Duration
	// KeepFiles leaves the job's files directory (Job.FilesRoot: its
	// generated ds_config.json, hostfile, NCCL configs) on every host when
	// the job ends; by default Launch removes it there once every rank is
	// gone, after a success, a failure or an interrupt alike.
	KeepFiles bool
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// editAgent (tests) changes a host's agent, e.g. a busy host's delay.
	editAgent func(host, script string) string
}

// DefaultHeartbeatTimeout is --heartbeat-timeout's default.
const DefaultHeartbeatTimeout = 30 * time.Second

// DefaultGrace is how long ranks get between SIGTERM and SIGKILL when the
// job is stopped: torchrun's 30 s (job.DefaultStopGraceSeconds), the time a
// script's SIGTERM handler has to save a checkpoint, and what the host
// scripts --output-dir writes default to.
const DefaultGrace = job.DefaultStopGraceSeconds * time.Second

// graceSeconds is Grace as the host scripts take it (job.GraceSeconds).
func (o Options) graceSeconds() int { return job.GraceSeconds(o.Grace) }

func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.TailLines <= 0 {
		o.TailLines = 20
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// DefaultWorkDir is where a job's files land when Job.WorkDir is empty.
func DefaultWorkDir(jobName string) string {
	return "/tmp/pipette-" + text.SafeName(jobName)
}

// Launch starts job on every host and supervises it until every rank has
// exited 0 (nil), a rank fails, a host is lost or ctx is cancelled. In the
// failure cases every rank on every host is stopped (TERM to each host's
// process group, KILL after Grace) before Launch returns a *JobFailure
// naming the first failure. Connection, upload and start problems are
// reported per host (*HostErrors inside the returned error) and leave
// nothing running.
func Launch(ctx context.Context, job job.Job, opts Options) error {
	opts = opts.withDefaults()
	if err := validateJob(job); err != nil {
		return err
	}
	if opts.Slurm != nil {
		return launchSlurm(ctx, job, opts)
	}
	if opts.Local {
		return launchLocal(ctx, job, opts)
	}
	if job.WorkDir == "" {
		job.WorkDir = DefaultWorkDir(job.Name)
	}
	pool := opts.Pool
	if pool == nil {
		pool = remote.NewPool(opts.SSH, opts.Fanout)
		defer pool.Close()
	}
	targets := jobTargets(job)
	if err := pool.DialAll(ctx, targets); err != nil {
		return fmt.Errorf("job %s: connect: %w", job.Name, err)
	}
	// The hosts whose files the last attempt's agents removed, or will
	// (their connection lost: not dialled again to remove them either).
	var filesGone []remote.HostTarget
	defer removeFiles(ctx, job, opts, func(ctx context.Context, script string) error {
		rest := slices.DeleteFunc(slices.Clone(targets), func(t remote.HostTarget) bool { return slices.Contains(filesGone, t) })
		return pool.Each(ctx, rest, func(ctx context.Context, t remote.HostTarget) error {
			return sshTransport{conn: pool.Conn(t)}.run(ctx, script)
		})
	})
	return runAttempts(ctx, job, opts, func(out *output, attempt int) error {
		// Each attempt's: an agent its watchdog stopped removed them.
		filesGone = nil
		if err := uploadFiles(ctx, pool, job, targets); err != nil {
			return fmt.Errorf("job %s: upload: %w", job.Name, err)
		}
		vias := make([]transport, len(targets))
		var standbys []*remote.Standby
		for i, t := range targets {
			if c := pool.Conn(t); c != nil {
				// The launch probe's session standing by (first attempt):
				// the agent starts there, with no login shell of its own.
				st := pool.TakeStandby(t)
				if st != nil {
					standbys = append(standbys, st)
				}
				vias[i] = sshTransport{conn: c, standby: st}
			}
		}
		defer func() {
			for _, st := range standbys {
				st.Close() // those not used
			}
		}()
		var err error
		filesGone, err = runAgents(ctx, job, targets, vias, pool.Each, opts, out, attempt)
		return err
	})
}

// removeFilesTimeout bounds the removal of the job's files directory: a
// host that does not answer in that time keeps it (and the user is told).
// The removal is a new SSH session, so sshd first runs the user's shell and
// its rc files (bash reads ~/.bashrc under sshd). A pyenv set-up there
// (`eval "$(pyenv init -)"`) rehashes its shims now and then: 6 s of CPU on
// an idle 2-core machine, and concurrent shells wait for its lock for up
// to a minute (PYENV_REHASH_TIMEOUT). Under load that outlasted the 10 s
// this was and left the directory behind (CI, TestRunCLIOnTestbed/files).
// A removal that answers never waits for the bound, and a lost host is not
// waited for at all (its agent removes the files: leftToAgent).
const removeFilesTimeout = 60 * time.Second

// removeFiles removes the job's files directory on every host through
// runAll (which runs a shell command everywhere) once the job is over,
// unless opts.KeepFiles: run deferred from the moment the directory may
// exist, so that a success, a failed upload or start, a rank's failure and
// an interrupt (ctx cancelled: the removal gets its own time) all leave no
// /tmp/pipette-launch-<job-id> behind. A host where it fails is named on
// opts.Out; the job's own result stands.
func removeFiles(ctx context.Context, job job.Job, opts Options, runAll func(ctx context.Context, script string) error) {
	script := job.RemoveFilesDirScript()
	if opts.KeepFiles || script == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeFilesTimeout)
	defer cancel()
	if err := runAll(ctx, "exec /bin/sh -c "+shellquote.Quote(script)); err != nil {
		fmt.Fprintf(opts.Out, "pipette-launch: job %s: its files directory %s was not removed everywhere (remove it by hand): %v\n", job.Name, job.FilesRoot(), err)
	}
}

// runAttempts opens the job's output (stream and --log-dir files) and runs
// the job, and again after a rank failure up to MaxRestarts times.
func runAttempts(ctx context.Context, job job.Job, opts Options, attempt func(out *output, n int) error) error {
	out := newOutput(job, opts)
	defer out.close()
	if err := out.openLogs(); err != nil {
		return fmt.Errorf("job %s: %w", job.Name, err)
	}
	switch {
	case opts.Attempt > opts.Restart:
		out.logAttempt(fmt.Sprintf("attempt %d (restart %d)", opts.Attempt+1, opts.Restart))
	case opts.Restart > 0:
		out.logAttempt(fmt.Sprintf("restart %d", opts.Restart))
	}
	for n := opts.Restart; ; n++ {
		if opts.Started != nil {
			opts.Started(n)
		}
		err := attempt(out, n)
		var jf *JobFailure
		if err == nil || !errors.As(err, &jf) {
			return err
		}
		jf.Restarts = n
		if opts.NoRestarts || !jf.restartable() || n >= opts.MaxRestarts || ctx.Err() != nil {
			return err
		}
		out.note("pipette-launch: %s; restarting the whole job (restart %d of %d)", jf.headline(), n+1, opts.MaxRestarts)
		out.logAttempt(fmt.Sprintf("restart %d", n+1))
	}
}

func validateJob(job job.Job) error {
	if len(job.Hosts) == 0 {
		return fmt.Errorf("job %s has no hosts", job.Name)
	}
	seen := map[string]bool{}
	ranks := map[int]string{}
	for _, h := range job.Hosts {
		if h.Name == "" {
			return fmt.Errorf("job %s: a host has no name", job.Name)
		}
		// Hosts that differ only by port (containers on one machine) are
		// distinct hosts.
		key := remote.HostTarget{Name: h.Name, User: h.User, Port: h.Port}.String()
		if seen[key] {
			return fmt.Errorf("job %s: host %s appears twice", job.Name, key)
		}
		seen[key] = true
		for _, r := range h.Ranks {
			if len(r.Argv) == 0 {
				return fmt.Errorf("job %s: rank %d on %s has no command", job.Name, r.Rank, h.Name)
			}
			if prev, dup := ranks[r.Rank]; dup {
				return fmt.Errorf("job %s: rank %d is on both %s and %s", job.Name, r.Rank, prev, h.Name)
			}
			ranks[r.Rank] = h.Name
		}
	}
	for _, f := range job.Files {
		if path.IsAbs(f.Path) || strings.HasPrefix(path.Clean(f.Path), "..") {
			return fmt.Errorf("job %s: file %q must be relative to the work directory", job.Name, f.Path)
		}
	}
	return nil
}

func jobTargets(job job.Job) []remote.HostTarget {
	out := make([]remote.HostTarget, len(job.Hosts))
	for i, h := range job.Hosts {
		out[i] = remote.HostTarget{Name: h.Name, Addr: h.Address, User: h.User, Port: h.Port}
	}
	return out
}

func uploadFiles(ctx context.Context, pool *remote.Pool, job job.Job, targets []remote.HostTarget) error {
	return pool.Each(ctx, targets, func(ctx context.Context, t remote.HostTarget) error {
		c := pool.Conn(t)
		if c == nil {
			return fmt.Errorf("not connected")
		}
		if script := job.FilesDirScript(); script != "" {
			if _, stderr, err := c.Run(ctx, "exec /bin/sh -c "+shellquote.Quote(script)); err != nil {
				return fmt.Errorf("job files directory %s: %w: %s", job.FilesRoot(), err, strings.TrimSpace(string(stderr)))
			}
		}
		for _, f := range job.Files {
			mode := f.Mode
			if mode == 0 {
				mode = 0o644
			}
			if err := c.Upload(ctx, f.Content, remoteFilePath(job, f), fsMode(mode)); err != nil {
				return err
			}
		}
		return nil
	})
}

// remoteFilePath is where f lands on a host: in the job's files directory,
// under the work directory unless it is absolute.
func remoteFilePath(job job.Job, f job.File) string {
	p := job.FilePath(f)
	if path.IsAbs(p) {
		return p
	}
	return path.Join(job.WorkDir, p)
}

// hostRun is one host's agent during one attempt.
type hostRun struct {
	job    job.HostJob
	index  int // in the job's hosts
	target remote.HostTarget
	via    transport // nil: not connected
	sess   agentSession
	lines  *lines.Writer

	mu       sync.Mutex
	pgid     int
	wd       int
	groups   []int     // the ranks' process groups
	killer   int       // the agent's killer (own session), once it stops ranks
	left     []int     // groups the agent saw alive at its end ("left")
	done     bool      // agent reported all ranks ended
	stopping bool      // stopAll has begun on this host
	stopAt   time.Time // when stopAll began on this host (our clock)

	clock  hostclock.Offset // the host's clock against ours, from the agent's first line
	sentAt time.Time        // when we started the agent: its clock line was stamped after it

	started chan struct{} // closed when the pgid line arrived

	// name is how output, logs and the summary name the host: its label
	// (job.HostLabels), "" for target.Name.
	name string
	// agentRemovesFiles: the agent removes the job's files once its
	// watchdog has stopped the ranks (job.Control's RemoveFiles);
	// filesRemoved: it said it did; leftToAgent: the host's connection was
	// lost, so it is not reached again (stopHost).
	agentRemovesFiles bool
	filesRemoved      bool
	leftToAgent       bool
}

func (r *hostRun) label() string {
	if r.name != "" {
		return r.name
	}
	return r.target.Name
}

type eventKind int

const (
	evRankExit eventKind = iota
	evHostEnded
)

type event struct {
	kind eventKind
	host *hostRun
	rank int
	code int
	err  error // evHostEnded: how the session ended
	at   time.Time
	// hostAt is when the rank ended by the host's own stamp, converted
	// to our clock; zero when the agent sent none. byUs: the agent had
	// begun stopping ranks when it ended.
	hostAt time.Time
	byUs   bool
}

// runAgents is one attempt of the job: each host's agent started through
// its transport (vias[i] for targets[i]; each drives several hosts at
// once), then supervised until the job ends or fails. filesGone are the
// hosts whose agents removed the job's files (they said so), or will (left
// to them: see leftToAgentError): the launcher need not.
func runAgents(ctx context.Context, j job.Job, targets []remote.HostTarget, vias []transport,
	each func(context.Context, []remote.HostTarget, func(context.Context, remote.HostTarget) error) error,
	opts Options, out *output, attempt int) (filesGone []remote.HostTarget, err error) {
	nonce := newNonce()
	removeFilesAfterStop := ""
	if !opts.KeepFiles {
		removeFilesAfterStop = j.RemoveFilesDirScript()
	}
	runs := make([]*hostRun, len(j.Hosts))
	nRanks := 0
	labels := job.HostLabels(j.Hosts)
	j.Hosts = slices.Clone(j.Hosts)
	for i, h := range j.Hosts {
		h.Ranks = prepareRanks(h.Ranks, attempt, opts)
		j.Hosts[i] = h
		nRanks += len(h.Ranks)
		runs[i] = &hostRun{job: h, index: i, target: targets[i], name: labels[i], via: vias[i], started: make(chan struct{}),
			agentRemovesFiles: removeFilesAfterStop != ""}
	}
	events := make(chan event, 2*nRanks+4*len(runs))
	byName := map[string]*hostRun{} // by HostTarget.String(): name, user and port
	for _, r := range runs {
		byName[r.target.String()] = r
	}
	graceSec := opts.graceSeconds()
	hbSec := job.GraceSeconds(opts.HeartbeatTimeout)

	defer func() { filesGone = agentsRemovedFiles(runs) }()
	err = each(ctx, targets, func(ctx context.Context, t remote.HostTarget) error {
		r := byName[t.String()]
		if r.via == nil {
			return fmt.Errorf("not connected")
		}
		hb := hbSec
		if !r.via.heartbeats() {
			hb = 0
		}
		script, err := agentScript(j, r.index, nonce, graceSec, hb, attempt, removeFilesAfterStop)
		if err != nil {
			return err
		}
		if opts.editAgent != nil {
			script = opts.editAgent(r.job.Name, script)
		}
		return startHost(ctx, r, script, nonce, opts, out, events)
	})
	if err != nil {
		stopErr := stopAll(runs, opts, out, stopSignal(ctx))
		return nil, errors.Join(fmt.Errorf("job %s: start (every rank started was stopped): %w", j.Name, err), stopErr)
	}

	sv := newSupervisor(j, runs, events, opts, out)
	first := sv.watch(ctx)
	if first == nil {
		return nil, nil
	}
	stopErr := sv.stopAndCollect(stopSignalFor(ctx, first))
	failure := sv.rootCause(first)
	failure.StopErr = stopErr
	return nil, failure
}

// agentsRemovedFiles are the hosts whose agents removed the job's files
// or were left to do it.
func agentsRemovedFiles(runs []*hostRun) []remote.HostTarget {
	var out []remote.HostTarget
	for _, r := range runs {
		r.mu.Lock()
		if r.agentRemovesFiles && (r.filesRemoved || r.leftToAgent) {
			out = append(out, r.target)
		}
		r.mu.Unlock()
	}
	return out
}

// prepareRanks adds the restart counters and PYTHONUNBUFFERED.
func prepareRanks(ranks []job.RankJob, attempt int, opts Options) []job.RankJob {
	out := make([]job.RankJob, len(ranks))
	for i, r := range ranks {
		r.Env = withRestartEnv(r.Env, attempt, opts.MaxRestarts)
		if !opts.KeepPythonBuffering && !hasEnv(r.Env, "PYTHONUNBUFFERED") {
			r.Env = append(r.Env, job.EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"})
		}
		out[i] = r
	}
	return out
}

func hasEnv(env []job.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// startHost starts the host's agent and waits until it reports its
// process group, so that it can be stopped.
func startHost(ctx context.Context, r *hostRun, script, nonce string, opts Options, out *output, events chan<- event) error {
	tag := "@@pipette-" + nonce + " "
	r.lines = outputLines(func(line string) { handleAgentLine(r, line, tag, opts, out, events) })
	stderr := outputLines(func(line string) {
		r.mu.Lock()
		stopping := r.stopping
		r.mu.Unlock()
		// setsid -w reports the agent's death by our own signal: not news.
		if stopping && strings.HasPrefix(line, "setsid: child ") {
			return
		}
		out.hostLine(r.label(), line)
	})
	// The session must outlive ctx: on cancel we still stop the ranks
	// through it (and its stdin keeps the watchdog waiting).
	r.mu.Lock()
	r.sentAt = opts.Now()
	r.mu.Unlock()
	sess, err := r.via.start(agentStartCommand(len(script)), r.lines, stderr)
	if err != nil {
		return err
	}
	if err := sess.WriteStdin([]byte(script)); err != nil {
		sess.Close()
		return fmt.Errorf("send agent: %w", err)
	}
	r.mu.Lock()
	r.sess = sess
	r.mu.Unlock()
	go func() {
		err := sess.Wait()
		r.lines.Flush()
		stderr.Flush()
		events <- event{kind: evHostEnded, host: r, err: err, at: opts.Now()}
	}()
	go r.via.keepAlive(sess, opts.HeartbeatTimeout)
	t := time.NewTimer(opts.StartTimeout)
	defer t.Stop()
	select {
	case <-r.started:
		return nil
	case <-sess.Done():
		select {
		case <-r.started:
			return nil // ended quickly after starting: the supervisor sees why
		default:
		}
		if err := sess.Wait(); err != nil {
			return fmt.Errorf("agent did not start: %w", err)
		}
		return fmt.Errorf("agent ended before reporting its process group")
	case <-t.C:
		return fmt.Errorf("agent did not report its process group within %s", opts.StartTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// agentStartCommand writes the agent (the first n bytes of stdin) into a
// fresh private directory (mktemp -d: owned by the login, mode 0700, a name
// nobody can guess or pre-create) and runs it under setsid, all in one
// session: one login-shell start per host instead of two. The rest of stdin
// stays open for the watchdog. head -c stops at n bytes and nothing follows
// them, so it cannot eat into what the agent reads; a short read (the
// session dropped mid-send) is caught by the size check and nothing runs.
// It runs under /bin/sh whatever the login shell is.
func agentStartCommand(n int) string {
	script := fmt.Sprintf(`d=$(mktemp -d "${TMPDIR:-/tmp}/pipette-agent.XXXXXX") && head -c %d >"$d/agent.sh" && `+
		`[ "$(wc -c <"$d/agent.sh")" -eq %d ] || { echo "pipette-launch: agent upload incomplete" >&2; exit 97; }; `+
		`exec setsid -w /bin/sh "$d/agent.sh"`, n, n)
	return "exec /bin/sh -c " + shellquote.Quote(script)
}

// handleAgentLine sorts one line of agent output: control line or rank output.
func handleAgentLine(r *hostRun, line, tag string, opts Options, out *output, events chan<- event) {
	if rest, ok := strings.CutPrefix(line, tag); ok {
		f := strings.Fields(rest)
		switch {
		case len(f) == 2 && f[0] == "clock":
			if t, err := hostclock.ParseNanos(f[1]); err == nil {
				now := opts.Now()
				r.mu.Lock()
				if r.sentAt.IsZero() {
					r.clock = hostclock.From(t, now)
				} else {
					r.clock = hostclock.Between(t, r.sentAt, now)
				}
				r.mu.Unlock()
			}
		case len(f) == 2 && f[0] == "pgid":
			r.mu.Lock()
			r.pgid, _ = strconv.Atoi(f[1])
			r.mu.Unlock()
			close(r.started)
		case len(f) >= 1 && f[0] == "ranks":
			gs := atois(f[1:])
			r.mu.Lock()
			r.groups = gs
			r.mu.Unlock()
		case len(f) == 2 && f[0] == "wd":
			r.mu.Lock()
			r.wd, _ = strconv.Atoi(f[1])
			r.mu.Unlock()
		case len(f) == 2 && f[0] == "killer":
			r.mu.Lock()
			r.killer, _ = strconv.Atoi(f[1])
			r.mu.Unlock()
		case len(f) >= 1 && f[0] == "left":
			r.mu.Lock()
			r.left = atois(f[1:])
			r.mu.Unlock()
		case len(f) == 1 && f[0] == "files-removed":
			r.mu.Lock()
			r.filesRemoved = true
			r.mu.Unlock()
		case len(f) == 1 && f[0] == "done":
			r.mu.Lock()
			r.done = true
			r.mu.Unlock()
		}
		return
	}
	rs, text, ok := strings.Cut(line, " ")
	rank, err := strconv.Atoi(rs)
	if !ok || err != nil {
		out.hostLine(r.label(), line)
		return
	}
	// A rank's exit line travels through its own output pipe, after its
	// last output line, so it is tagged with the rank like its output.
	if rest, ok := strings.CutPrefix(text, tag+"exit "); ok {
		f := strings.Fields(rest)
		if len(f) >= 2 && len(f) <= 4 && f[0] == rs {
			code, _ := strconv.Atoi(f[1])
			ev := event{kind: evRankExit, host: r, rank: rank, code: code, at: opts.Now()}
			ev.byUs = len(f) == 4 && f[3] == "1"
			if len(f) >= 3 {
				r.mu.Lock()
				clk := r.clock
				r.mu.Unlock()
				if t, err := hostclock.ParseNanos(f[2]); err == nil {
					ev.hostAt = clk.ToLocal(t)
				}
			}
			events <- ev
			return
		}
	}
	out.rankLine(r.label(), rank, text)
}

// atois reads process ids and groups (above 1: never init, never "all").
func atois(fs []string) []int {
	var out []int
	for _, g := range fs {
		if n, err := strconv.Atoi(g); err == nil && n > 1 {
			out = append(out, n)
		}
	}
	return out
}

// stopAll stops every started host's ranks at once: sig (a shell signal
// name: TERM, or the one that interrupted pipette-launch) to the ranks,
// KILL after the grace period, then waits for the agent sessions to end.
// A host whose connection is lost is not dialled again but reported
// (leftToAgentError): its agent's watchdog stops the ranks once its session
// ends or the heartbeat falls silent, and removes the job's files.
func stopAll(runs []*hostRun, opts Options, out *output, sig string) error {
	var wg sync.WaitGroup
	errs := &remote.HostErrors{}
	var mu sync.Mutex
	for _, r := range runs {
		r.mu.Lock()
		sess := r.sess
		r.stopping = true
		if r.stopAt.IsZero() {
			r.stopAt = opts.Now()
		}
		r.mu.Unlock()
		if sess == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stopHost(r, sess, opts, sig); err != nil {
				mu.Lock()
				errs.Add(r.label(), err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errs.ErrorOrNil(); err != nil {
		out.note("pipette-launch: could not confirm every rank stopped: %v", err)
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

// agentEndBound is how long an agent may take, once told to stop, to end
// on its own: its ranks' grace, the grace it gives what they left behind,
// and ps scans and process starts that take seconds on a busy host.
func agentEndBound(grace time.Duration) time.Duration { return 2*grace + 20*time.Second }

// stopHost stops one host and returns once every process of the job there
// is gone (the agent, its helpers and the ranks' sessions), or says what
// could not be confirmed.
func stopHost(r *hostRun, sess agentSession, opts Options, sig string) error {
	// EOF on its stdin sets the agent's watchdog stopping the ranks at
	// once (sig, KILL after the grace): no new session, so no login
	// shell's start-up (seconds on a busy host) before the ranks hear of
	// it. The watchdog takes the last name written before the EOF; TERM
	// is its default, and a failed write leaves it that. An agent that
	// reports "done" and ends has seen every rank end and everything it
	// started gone: confirmed. Otherwise a stop command does it.
	if sig != "TERM" && r.via.lost() == nil {
		_ = sess.WriteStdin([]byte(sig + "\n"))
	}
	sess.CloseStdin()
	ended := true
	select {
	case <-sess.Done():
	case <-time.After(agentEndBound(opts.Grace)):
		ended = false
	}
	r.mu.Lock()
	pgid, wd, killer, groups, done, left := r.pgid, r.wd, r.killer, slices.Clone(r.groups), r.done, r.left
	r.mu.Unlock()
	if ended && done && len(left) == 0 {
		return nil
	}
	if ended && pgid <= 1 {
		return nil // the agent prints its group before starting anything: none started
	}
	if r.via.lost() != nil {
		// Not dialled again: a cut host would hold us for the connect
		// timeout, and its agent needs no one (see leftToAgentError).
		return leftToAgent(r, opts)
	}
	if pgid <= 1 {
		sess.Close()
		return fmt.Errorf("the agent did not report its process group and did not end within %s; cannot confirm nothing runs", agentEndBound(opts.Grace))
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Grace+30*time.Second)
	defer cancel()
	err := r.via.run(ctx, stopCommand(pgid, atois([]string{strconv.Itoa(wd), strconv.Itoa(killer)}), append(groups, left...), opts.Grace))
	// The agent is gone now (or never will be): let its session go.
	select {
	case <-sess.Done():
	case <-time.After(5 * time.Second):
		sess.Close()
	}
	if err != nil {
		var ue *unreachableError
		if errors.As(err, &ue) {
			return leftToAgent(r, opts) // lost since the check above
		}
		return fmt.Errorf("stopping process group %d: %w", pgid, err)
	}
	return nil
}

// leftToAgentError is a host whose connection was lost while its agent
// ran: it is not dialled again, neither to stop its ranks nor to remove the
// job's files. Its agent's watchdog stops the ranks (TERM, KILL after the
// grace) when its session ends or it hears nothing from us for the
// heartbeat timeout (a network cut), then removes the job's files and its
// own.
type leftToAgentError struct {
	lost      error // why the connection is lost (wraps remote.ErrConnLost)
	grace, hb time.Duration
	files     bool // the agent removes a files directory
}

// leftToAgent marks r's host left to its agent (the launch does not remove
// the job's files there either) and says so.
func leftToAgent(r *hostRun, opts Options) *leftToAgentError {
	r.mu.Lock()
	r.leftToAgent = true
	r.mu.Unlock()
	e := &leftToAgentError{lost: r.via.lost(), grace: opts.Grace, files: r.agentRemovesFiles}
	if e.lost == nil {
		e.lost = remote.ErrConnLost // it ended between the check and our stop command
	}
	if r.via.heartbeats() {
		e.hb = opts.HeartbeatTimeout
	}
	return e
}

// Unwrap: errors.Is(err, remote.ErrConnLost) tells a lost host (the
// elastic loop takes it back once it passes its check again).
func (e *leftToAgentError) Unwrap() error { return e.lost }

func (e *leftToAgentError) Error() string {
	when := "once its session ends"
	if e.hb > 0 {
		when += fmt.Sprintf(" or it hears nothing from pipette-launch for %s (--heartbeat-timeout)", e.hb)
	}
	files := ""
	if e.files {
		files = " and removes the job's files"
	}
	return fmt.Sprintf("not reached (its connection is lost; not dialled again): its own agent stops its ranks (TERM, KILL after %s)%s %s", e.grace, files, when)
}

// stopCommand is the remote shell line that stops a host's job: the
// agent's helpers first (the watchdog would race us; the killer), TERM to
// the agent's group (the agent passes it to each rank's session), wait up
// to grace for the agent's group and the ranks' sessions, KILL them all,
// then any killer the agent started that we were not told of (the TERM
// makes the agent start one, and a dropped session loses the line naming
// it: the agent puts its group last on the killer's command line), wait
// until they are gone (a KILLed process still has to run to die), and
// fail if anything survives. The waits are timed by the clock, not by
// counting turns: one ps scan takes seconds on a busy host. Signals are
// written "kill -SIG -PGID": dash's kill rejects "--".
func stopCommand(pgid int, helpers, groups []int, grace time.Duration) string {
	all := append(append([]int{pgid}, groups...), helpers...)
	var ids, kill []string
	for _, g := range all {
		ids = append(ids, strconv.Itoa(g))
		kill = append(kill, fmt.Sprintf("-%d", g))
	}
	cmd := ""
	for _, h := range helpers {
		cmd += fmt.Sprintf("kill -KILL -%d 2>/dev/null; kill -KILL %d 2>/dev/null; ", h, h)
	}
	// alive ignores zombies: they are dead, only not yet reaped (slow on
	// some inits), and kill -0 would count them.
	script := cmd + fmt.Sprintf("ks=; alive() { ps -e -o pgid= -o stat= | awk -v gs=\" %[3]s $ks \" '$2 !~ /^Z/ && index(gs, \" \" $1 \" \") {f=1} END {exit !f}'; }; "+
		"ms() { echo $(($(date +%%s%%N) / 1000000)); }; "+
		"kill -TERM -%[4]d 2>/dev/null; end=$(($(ms) + %[2]d)); "+
		"while alive && [ $(ms) -lt $end ]; do sleep 0.1; done; "+
		"for g in %[1]s; do kill -KILL $g 2>/dev/null; done; "+
		"ks=$(ps -e -o pid= -o args= | awk -v pg=%[4]d '$NF == pg && index($0, \" pipette-killer \") {print $1}'); "+
		"for k in $ks; do kill -KILL -$k 2>/dev/null; kill -KILL $k 2>/dev/null; done; end=$(($(ms) + 10000)); "+
		"while alive && [ $(ms) -lt $end ]; do sleep 0.1; done; "+
		"if alive; then echo 'processes survived KILL' >&2; exit 1; fi", strings.Join(kill, " "), grace.Milliseconds(), strings.Join(ids, " "), pgid)
	// The login shell may not be POSIX (fish, csh): run it under sh.
	return "exec /bin/sh -c " + shellquote.Quote(script)
}
