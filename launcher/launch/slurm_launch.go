package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Inside a Slurm allocation a job runs as ONE srun step with one task per
// node. Every task runs the same dispatcher, which takes its node's agent
// (the same agent script SSH starts) out of the bundle srun broadcasts on
// stdin (--input=all) and becomes it; the rest of stdin stays open for the
// agent's watchdog, as over SSH. --label prefixes each output line with the
// task number; each task's first line names its node, which maps task
// numbers to hosts, so the job's rank order is ours, not Slurm's task
// order. Stopping is Slurm's: scancel --signal=TERM on the step, KILL after
// the grace period; a stop by a signal to pipette-launch goes through the
// agents' stdin first, as over SSH (slurmStep.passOn). A restart
// (--max-restarts) is a new step.

// slurmDispatcher's first line is "<tag> node NAME STEPID".
const slurmDispatcher = `d=$(mktemp -d "${TMPDIR:-/tmp}/pipette-agent.XXXXXX") || exit 98
pre=0; len=-1; post=0
while IFS=' ' read -r n l; do
  [ "$n" = "@@end" ] && break
  if [ "$len" -ge 0 ]; then post=$((post + l))
  elif [ "$n" = "$SLURMD_NODENAME" ]; then len=$l
  else pre=$((pre + l)); fi
done
printf '%s node %s %s\n' "$1" "$SLURMD_NODENAME" "$SLURM_STEP_ID"
[ "$len" -ge 0 ] || { echo "pipette-launch: no agent for Slurm node $SLURMD_NODENAME" >&2; exit 96; }
head -c "$pre" >/dev/null
head -c "$len" >"$d/agent.sh"
head -c "$post" >/dev/null
[ "$(wc -c <"$d/agent.sh")" -eq "$len" ] || { echo "pipette-launch: agent upload incomplete" >&2; exit 97; }
exec /bin/sh "$d/agent.sh"
`

// slurmBundle is what srun broadcasts: one "NODE LENGTH" line per host, an
// "@@end" line, then the hosts' agents in that order.
func slurmBundle(names, scripts []string) []byte {
	var b bytes.Buffer
	for i, n := range names {
		fmt.Fprintf(&b, "%s %d\n", n, len(scripts[i]))
	}
	b.WriteString("@@end 0\n")
	for _, s := range scripts {
		b.WriteString(s)
	}
	return b.Bytes()
}

// SrunCommand is the srun command line a Slurm launch of job through s runs (for
// --dry-run); TAG stands for the per-attempt control tag.
func SrunCommand(s remote.Slurm, job job.Job) string {
	return shellquote.Join(append([]string{s.Program()}, jobStepArgs(s, hostNames(job), "TAG")...))
}

// jobStepArgs: the dispatcher gets the control tag as $1.
func jobStepArgs(s remote.Slurm, nodes []string, tag string) []string {
	return append(s.StepArgs(nodes), "--input=all", "--unbuffered", "/bin/sh", "-c", slurmDispatcher, "pipette-dispatch", tag)
}

func hostNames(job job.Job) []string {
	out := make([]string, len(job.Hosts))
	for i, h := range job.Hosts {
		out[i] = h.Name
	}
	return out
}

// launchSlurm is Launch through srun: same agent, supervision, failure
// summary and restarts as over SSH.
func launchSlurm(ctx context.Context, job job.Job, opts Options) error {
	s := *opts.Slurm
	if job.WorkDir == "" {
		job.WorkDir = DefaultWorkDir(job.Name)
	}
	defer removeFiles(ctx, job, opts, func(ctx context.Context, script string) error {
		_, stderr, runErr, _ := s.RunEach(ctx, hostNames(job), script)
		if runErr != nil {
			return fmt.Errorf("%w: %s", runErr, strings.TrimSpace(string(stderr)))
		}
		return nil
	})
	if err := uploadFilesSlurm(ctx, s, job); err != nil {
		return fmt.Errorf("job %s: upload through srun: %w", job.Name, err)
	}
	return runAttempts(ctx, job, opts, func(out *output, attempt int) error {
		return runSlurmAttempt(ctx, s, job, opts, out, attempt)
	})
}

// uploadFilesSlurm writes the job's files on every node with one srun step
// per file (the same bytes everywhere), each checked by size and renamed
// into place.
func uploadFilesSlurm(ctx context.Context, s remote.Slurm, job job.Job) error {
	nodes := hostNames(job)
	private := job.FilesDirScript() // the directory checked private and this user's
	if private == "" {
		private = ":"
	}
	for _, f := range job.Files {
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		dst := remoteFilePath(job, f)
		script := fmt.Sprintf(`set -e; %[6]s; mkdir -p -m 700 %[1]s; t=$(mktemp %[1]s/.pipette-upload.XXXXXX); head -c %[2]d >"$t"; `+
			`[ "$(wc -c <"$t")" -eq %[2]d ] || { rm -f "$t"; echo "upload of %[3]s incomplete" >&2; exit 1; }; chmod %[4]o "$t"; mv "$t" %[5]s`,
			shellquote.Quote(path.Dir(dst)), len(f.Content), oneLine(f.Path), mode, shellquote.Quote(dst), private)
		args := append(s.StepArgs(nodes), "--input=all", "/bin/sh", "-c", script)
		c := exec.CommandContext(ctx, s.Program(), args...)
		c.Env = s.Environ()
		c.Stdin = bytes.NewReader(f.Content)
		if o, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", f.Path, err, strings.TrimSpace(string(o)))
		}
	}
	return nil
}

// slurmStep is one attempt's srun process.
type slurmStep struct {
	s      remote.Slurm
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	done   chan struct{}
	err    error // srun's exit, once done is closed
	stderr syncbuf.Buffer

	mu     sync.Mutex
	stepID string
	// afterKill is how long stop waits for srun after the KILL before
	// ending srun itself (0: 15 s).
	afterKill time.Duration
}

func runSlurmAttempt(ctx context.Context, s remote.Slurm, job job.Job, opts Options, out *output, attempt int) error {
	nonce := newNonce()
	tag := "@@pipette-" + nonce + " "
	graceSec := opts.graceSeconds()
	runs := make([]*hostRun, len(job.Hosts))
	byNode := map[string]*hostRun{}
	names := hostNames(job)
	scripts := make([]string, len(job.Hosts))
	nRanks := 0
	job.Hosts = slices.Clone(job.Hosts)
	for i, h := range job.Hosts {
		h.Ranks = withSlurmTaskEnv(prepareRanks(h.Ranks, attempt, opts), i)
		job.Hosts[i] = h
		nRanks += len(h.Ranks)
		runs[i] = &hostRun{job: h, index: i, target: remote.HostTarget{Name: h.Name}, started: make(chan struct{})}
		byNode[h.Name] = runs[i]
	}
	for i := range job.Hosts {
		// No heartbeat through srun (Slurm watches its nodes): EOF only.
		// The files stay for a restart; the last srun step removes them.
		script, err := agentScript(job, i, nonce, graceSec, 0, attempt, "")
		if err != nil {
			return err
		}
		scripts[i] = script
	}
	events := make(chan event, 2*nRanks+4*len(runs))
	st := &slurmStep{s: s, done: make(chan struct{})}
	demux := newSlurmDemux(byNode, tag, opts, out, events, st)
	st.cmd = exec.Command(s.Program(), jobStepArgs(s, names, strings.TrimSuffix(tag, " "))...)
	st.cmd.Env = s.Environ()
	stdout, stderr := outputLines(demux.stdout), outputLines(demux.stderr)
	st.cmd.Stdout = stdout
	st.cmd.Stderr = io.MultiWriter(&st.stderr, stderr)
	var err error
	if st.stdin, err = st.cmd.StdinPipe(); err != nil {
		return err
	}
	// Every agent's clock line is stamped after this: it bounds the offsets.
	sent := opts.Now()
	for _, r := range runs {
		r.sentAt = sent
	}
	if err := st.cmd.Start(); err != nil {
		return fmt.Errorf("job %s: start srun: %w", job.Name, err)
	}
	go func() {
		err := st.cmd.Wait()
		stdout.Flush()
		stderr.Flush()
		st.err = err
		close(st.done)
		demux.stepEnded(err)
	}()
	if _, err := st.stdin.Write(slurmBundle(names, scripts)); err != nil {
		st.stop(opts, out, "TERM")
		return fmt.Errorf("job %s: send agents to srun: %w", job.Name, err)
	}
	if err := waitStarted(ctx, runs, st, opts); err != nil {
		stopErr := st.stop(opts, out, stopSignal(ctx))
		return errors.Join(fmt.Errorf("job %s: start through srun (every rank started was stopped): %w%s", job.Name, err, remote.StderrSuffix([]byte(st.stderr.String()))), stopErr)
	}
	watched := make(chan struct{})
	go watchSlurmNodes(ctx, st, names, demux, watched)
	failure := supervise(ctx, job, runs, events, opts, out)
	close(watched)
	if failure == nil {
		<-st.done
		st.waitStepGone(30 * time.Second)
		return nil
	}
	// Asked before stopping: Slurm forgets a finished job after MinJobAge.
	if why := slurmCancelReason(st); why != "" && !failure.interrupted {
		failure.Reason = why + "; first failure seen: " + failure.Reason
		failure.interrupted = true
	}
	if failure.hostLost {
		// Slurm found a node failed and kills the step's tasks elsewhere
		// itself; srun waits on the lost node, and Slurm lists the step
		// until that node is back: neither is worth waiting for.
		st.afterKill = 2 * time.Second
		failure.StopErr = st.stop(opts, out, "TERM")
		return failure
	}
	failure.StopErr = st.stop(opts, out, stopSignalFor(ctx, failure))
	st.waitStepGone(30 * time.Second)
	return failure
}

// withSlurmTaskEnv sets the Slurm task variables each rank inherits from
// its srun task (one task per node) to the rank's own values: DeepSpeed's
// and Lightning's environment detection read SLURM_PROCID and friends in
// preference to RANK, and would otherwise see the node's task number.
func withSlurmTaskEnv(ranks []job.RankJob, node int) []job.RankJob {
	for i, r := range ranks {
		get := func(name string) string {
			for _, e := range r.Env {
				if e.Name == name {
					return e.Value
				}
			}
			return ""
		}
		set := map[string]string{
			"SLURM_PROCID":          get("RANK"),
			"SLURM_LOCALID":         get("LOCAL_RANK"),
			"SLURM_NODEID":          strconv.Itoa(node),
			"SLURM_NTASKS":          get("WORLD_SIZE"),
			"SLURM_NPROCS":          get("WORLD_SIZE"),
			"SLURM_NTASKS_PER_NODE": get("LOCAL_WORLD_SIZE"),
			"SLURM_STEP_NUM_TASKS":  get("WORLD_SIZE"),
		}
		env := make([]job.EnvVar, 0, len(r.Env)+len(set))
		for _, e := range r.Env {
			if _, ours := set[e.Name]; !ours {
				env = append(env, e)
			}
		}
		for _, n := range []string{"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"} {
			if v := set[n]; v != "" {
				env = append(env, job.EnvVar{Name: n, Value: v})
			}
		}
		ranks[i].Env = env
	}
	return ranks
}

// slurmDemux sorts srun's labelled output into the hosts' agent streams.
type slurmDemux struct {
	byNode map[string]*hostRun
	tag    string
	opts   Options
	out    *output
	events chan<- event
	step   *slurmStep

	mu     sync.Mutex
	byTask map[int]*hostRun
	ended  map[*hostRun]bool
}

func newSlurmDemux(byNode map[string]*hostRun, tag string, opts Options, out *output, events chan<- event, st *slurmStep) *slurmDemux {
	return &slurmDemux{byNode: byNode, tag: tag, opts: opts, out: out, events: events, step: st,
		byTask: map[int]*hostRun{}, ended: map[*hostRun]bool{}}
}

// split returns the task a labelled line came from and its text.
func splitLabel(line string) (int, string, bool) {
	label, text, ok := strings.Cut(line, ": ")
	if !ok {
		return 0, "", false
	}
	task, err := strconv.Atoi(strings.TrimSpace(label))
	return task, text, err == nil
}

func (d *slurmDemux) stdout(line string) {
	task, text, ok := splitLabel(line)
	if !ok {
		d.out.note("srun: %s", line)
		return
	}
	if rest, ok := strings.CutPrefix(text, d.tag+"node "); ok {
		f := strings.Fields(rest)
		if len(f) >= 1 {
			d.mu.Lock()
			if r := d.byNode[f[0]]; r != nil {
				d.byTask[task] = r
			}
			d.mu.Unlock()
			if len(f) == 2 {
				d.step.mu.Lock()
				d.step.stepID = f[1]
				d.step.mu.Unlock()
			}
		}
		return
	}
	d.mu.Lock()
	r := d.byTask[task]
	d.mu.Unlock()
	if r == nil {
		d.out.note("srun task %d: %s", task, text)
		return
	}
	handleAgentLine(r, text, d.tag, d.opts, d.out, d.events)
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done {
		d.hostEnded(r, nil)
	}
}

func (d *slurmDemux) stderr(line string) {
	task, text, ok := splitLabel(line)
	d.mu.Lock()
	r := d.byTask[task]
	d.mu.Unlock()
	if !ok || r == nil {
		d.out.note("%s", line)
		return
	}
	d.out.hostLine(r.label(), text)
}

// hostEnded reports a host's end once: at its agent's "done", or when the
// step ended without one.
func (d *slurmDemux) hostEnded(r *hostRun, err error) {
	d.mu.Lock()
	already := d.ended[r]
	d.ended[r] = true
	d.mu.Unlock()
	if !already {
		d.events <- event{kind: evHostEnded, host: r, err: err, at: d.opts.Now()}
	}
}

func (d *slurmDemux) stepEnded(err error) {
	for _, r := range d.byNode {
		why := fmt.Errorf("the srun step ended before the agent on %s finished (srun: %v)", r.target.Name, err)
		if err == nil {
			why = fmt.Errorf("the srun step ended before the agent on %s finished", r.target.Name)
		}
		d.hostEnded(r, why)
	}
}

func waitStarted(ctx context.Context, runs []*hostRun, st *slurmStep, opts Options) error {
	t := time.NewTimer(opts.StartTimeout)
	defer t.Stop()
	for _, r := range runs {
		select {
		case <-r.started:
		case <-st.done:
			select {
			case <-r.started:
				continue
			default:
			}
			return fmt.Errorf("%s: srun ended before the agent started (%v)", r.target.Name, st.err)
		case <-t.C:
			return fmt.Errorf("%s: the agent did not start within %s", r.target.Name, opts.StartTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stop ends the step: TERM to every process of the step (Slurm signals
// them all), KILL after the grace period, and waits for srun to end. With
// sig other than TERM (a signal that stopped pipette-launch) it first
// passes sig on through the agents (passOn).
func (st *slurmStep) stop(opts Options, out *output, sig string) error {
	defer st.stdin.Close()
	select {
	case <-st.done:
		return nil
	default:
	}
	if sig != "TERM" && st.passOn(sig, opts.Grace) {
		return nil
	}
	st.mu.Lock()
	step := st.stepID
	st.mu.Unlock()
	id := st.s.JobID
	if step != "" {
		id += "." + step
	}
	st.scancel("TERM", id)
	select {
	case <-st.done:
		return nil
	case <-time.After(opts.Grace):
	}
	st.scancel("KILL", id)
	wait := st.afterKill
	if wait == 0 {
		wait = 15 * time.Second
	}
	select {
	case <-st.done:
		return nil
	case <-time.After(wait):
	}
	// srun waits for a node that no longer answers (a lost node): end it;
	// Slurm ends the step's processes there once the node is back.
	_ = st.cmd.Process.Kill()
	select {
	case <-st.done:
	case <-time.After(5 * time.Second):
	}
	err := fmt.Errorf("srun step %s did not end %s after KILL (srun was killed)", id, wait)
	out.note("pipette-launch: %v", err)
	return err
}

// slurmWatchEvery is how often a running step's nodes are checked with
// Slurm.
const slurmWatchEvery = 2 * time.Second

// watchSlurmNodes reports a node of the step that Slurm finds failed (not
// responding, down, or dropped from the allocation) as lost, until done
// closes or the step ends: srun carries no heartbeat of ours, and on a
// node failure Slurm kills the step's tasks on the other nodes while srun
// waits on the lost one.
func watchSlurmNodes(ctx context.Context, st *slurmStep, nodes []string, d *slurmDemux, done <-chan struct{}) {
	t := time.NewTicker(slurmWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-st.done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		failed, err := SlurmFailedNodes(ctx, st.s, nodes)
		if err != nil {
			continue // Slurm busy: ask again
		}
		for _, n := range nodes {
			if why, ok := failed[n]; ok {
				d.hostEnded(d.byNode[n], fmt.Errorf("%w: %s", remote.ErrConnLost, why))
			}
		}
		if len(failed) > 0 {
			return
		}
	}
}

// passOn writes sig's name and EOF on srun's stdin, which srun broadcasts
// (--input=all): each agent's watchdog sends its ranks sig, KILL after the
// grace, as over SSH. A scancel would signal every process of the step,
// each rank once from Slurm and again from its host script: a second
// SIGINT interrupts the KeyboardInterrupt handler the first one started.
// It reports whether the step ended within the agents' bound; else stop
// goes on with scancel.
func (st *slurmStep) passOn(sig string, grace time.Duration) bool {
	if _, err := io.WriteString(st.stdin, sig+"\n"); err != nil {
		return false
	}
	st.stdin.Close()
	select {
	case <-st.done:
		return true
	case <-time.After(agentEndBound(grace)):
		return false
	}
}

func (st *slurmStep) scancel(sig, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "scancel", "--signal="+sig, id)
	c.Env = st.s.Environ()
	_ = c.Run() // a step that already ended is not an error
}

// slurmCancelReason says why Slurm is ending the allocation when it is
// (scancel, the time limit, a node failure, preemption), from the job's
// state, which changes when Slurm decides, before any rank dies; "" while
// the allocation runs (a failure of our own, or our own stop).
func slurmCancelReason(st *slurmStep) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "scontrol", "-o", "show", "job", st.s.JobID)
	c.Env = st.s.Environ()
	out, err := c.Output()
	if err != nil {
		return ""
	}
	fields := map[string]string{}
	for _, f := range strings.Fields(string(out)) {
		if k, v, ok := strings.Cut(f, "="); ok {
			fields[k] = v
		}
	}
	switch state := fields["JobState"]; state {
	case "", "RUNNING", "PENDING", "SUSPENDED", "CONFIGURING":
		return ""
	case "TIMEOUT":
		return "the Slurm job reached its time limit"
	case "CANCELLED":
		return "the Slurm job was cancelled (scancel)"
	case "COMPLETING":
		// Ending while our step still ran: Slurm is ending the allocation.
		if limit, ok := slurmDuration(fields["TimeLimit"]); ok {
			if run, ok := slurmDuration(fields["RunTime"]); ok && run >= limit {
				return "the Slurm job reached its time limit"
			}
		}
		return "the Slurm job was cancelled (scancel) or its allocation ended"
	default:
		return "the Slurm job ended (state " + state + ")"
	}
}

// slurmDuration parses Slurm's [D-]HH:MM:SS; UNLIMITED is not a duration.
func slurmDuration(s string) (time.Duration, bool) {
	days := 0
	if d, rest, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.Atoi(d)
		if err != nil {
			return 0, false
		}
		days, s = n, rest
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, false
	}
	var hms [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return 0, false
		}
		hms[i] = n
	}
	return time.Duration(((days*24+hms[0])*60+hms[1])*60+hms[2]) * time.Second, true
}

// waitStepGone waits (bounded) until Slurm no longer lists the step.
func (st *slurmStep) waitStepGone(limit time.Duration) {
	st.mu.Lock()
	step := st.stepID
	st.mu.Unlock()
	st.s.WaitStepGone(step, limit)
}
