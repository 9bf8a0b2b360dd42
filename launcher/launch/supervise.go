package launch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// When one rank fails, the others usually fail right after it: blocked in a
// collective, they see "Connection closed by peer" and exit on their own
// before any stop of ours reaches them. Their exit reports race each other
// over separate SSH sessions, so the first report to arrive is often one of
// those cascading ranks. The supervisor therefore keeps watching while it
// stops the job, and names the failure that happened first by the hosts'
// own exit stamps (corrected by each host's measured clock offset),
// preferring a rank's own failure over ranks that ended because we stopped
// them.

// supervisor follows one attempt's events.
type supervisor struct {
	job    job.Job
	runs   []*hostRun
	events <-chan event
	opts   Options
	out    *output

	exits     []rankExit
	exited    map[*hostRun]map[int]bool
	ended     map[*hostRun]bool
	hostFails []hostFail
}

// rankExit is one rank's end, at is on our clock.
type rankExit struct {
	host    *hostRun
	rank    int
	code    int
	at      time.Time
	stamped bool // at comes from the host's own stamp
	byUs    bool // the agent had begun stopping ranks when it ended
}

// hostFail is a host-level failure (lost connection, agent ended early).
type hostFail struct {
	host *hostRun
	f    *JobFailure
}

func newSupervisor(job job.Job, runs []*hostRun, events <-chan event, opts Options, out *output) *supervisor {
	return &supervisor{job: job, runs: runs, events: events, opts: opts, out: out,
		exited: map[*hostRun]map[int]bool{}, ended: map[*hostRun]bool{}}
}

// supervise waits for the job to finish or fail; nil means every rank
// exited 0. The failure returned is the first one observed (see rootCause
// for the one to name).
func supervise(ctx context.Context, job job.Job, runs []*hostRun, events <-chan event, opts Options, out *output) *JobFailure {
	return newSupervisor(job, runs, events, opts, out).watch(ctx)
}

func (s *supervisor) watch(ctx context.Context) *JobFailure {
	for {
		select {
		case <-ctx.Done():
			return &JobFailure{Job: s.job.Name, Time: s.opts.Now(), Rank: -1, ExitCode: -1,
				Reason: "interrupted: " + context.Cause(ctx).Error(), interrupted: true}
		case ev := <-s.events:
			if f := s.record(ev); f != nil {
				return f
			}
			if len(s.ended) == len(s.runs) {
				return nil
			}
		}
	}
}

// record takes one event in and returns the failure it is, if any.
func (s *supervisor) record(ev event) *JobFailure {
	switch ev.kind {
	case evRankExit:
		at, stamped := ev.at, false
		if !ev.hostAt.IsZero() {
			at, stamped = ev.hostAt, true
		}
		s.exits = append(s.exits, rankExit{host: ev.host, rank: ev.rank, code: ev.code, at: at, stamped: stamped, byUs: ev.byUs})
		if s.exited[ev.host] == nil {
			s.exited[ev.host] = map[int]bool{}
		}
		s.exited[ev.host][ev.rank] = true
		if ev.code != 0 {
			return s.rankFailure(s.exits[len(s.exits)-1])
		}
	case evHostEnded:
		s.ended[ev.host] = true
		ev.host.mu.Lock()
		done, stopAt := ev.host.done, ev.host.stopAt
		ev.host.mu.Unlock()
		var f *JobFailure
		if !done || ev.err != nil {
			f = hostFailure(s.job, ev)
		} else {
			f = missingExit(s.job, ev, s.exited[ev.host])
		}
		// An agent that ends badly after we stopped it is our doing.
		if f != nil && (stopAt.IsZero() || ev.at.Before(stopAt)) {
			s.hostFails = append(s.hostFails, hostFail{host: ev.host, f: f})
			return f
		}
	}
	return nil
}

// stopAndCollect stops every host (sig to the ranks: stopSignalFor) and,
// meanwhile and until each host's session has ended (or shortly after the
// stop), keeps recording events: the exits that race the first report are
// the evidence for rootCause.
func (s *supervisor) stopAndCollect(sig string) error {
	errc := make(chan error, 1)
	go func() { errc <- stopAll(s.runs, s.opts, s.out, sig) }()
	var stopErr error
	var settle <-chan time.Time
	for {
		select {
		case ev := <-s.events:
			s.record(ev)
			if settle != nil && s.allEnded() {
				return stopErr
			}
		case stopErr = <-errc:
			if s.allEnded() {
				return stopErr
			}
			// Sessions end within moments of a confirmed stop; a host
			// that cannot be reached never reports.
			settle = time.After(2 * time.Second)
		case <-settle:
			return stopErr
		}
	}
}

func (s *supervisor) allEnded() bool {
	for _, r := range s.runs {
		r.mu.Lock()
		started := r.sess != nil
		r.mu.Unlock()
		if started && !s.ended[r] {
			return false
		}
	}
	return true
}

// stoppedByUs reports whether our signal, not the rank, ended it: it died
// of a signal (TERM, KILL: exit code above 128) once we (or its host's
// agent, after a sibling failed) had begun stopping its host. A rank that
// exited with its own code did so itself, whenever its report came: on a
// busy host the wrapper notes the exit (and the stop flag) seconds late,
// and a culprit counted as stopped left a cascading rank blamed (CI,
// TestLaunchCascadeNamesTheCulprit at load 16).
func stoppedByUs(x rankExit) bool {
	if x.code >= 0 && x.code <= 128 {
		return false
	}
	x.host.mu.Lock()
	stopAt := x.host.stopAt
	x.host.mu.Unlock()
	return x.byUs || (!stopAt.IsZero() && !x.at.Before(stopAt))
}

// rootCause names the earliest failure: the first rank to fail on its own
// (by the hosts' corrected clocks), or a host lost before it; ranks that
// ended because we stopped them are blamed only when nothing else failed.
// It counts the ranks that failed after it.
func (s *supervisor) rootCause(first *JobFailure) *JobFailure {
	if first.interrupted {
		return first
	}
	type cand struct {
		at   time.Time
		f    func() *JobFailure
		rank int
		host *hostRun
		peer bool // its last lines say a peer went away: a consequence
	}
	var own []cand
	byUs := 0
	for _, x := range s.exits {
		if x.code == 0 {
			continue
		}
		if stoppedByUs(x) {
			byUs++
			continue
		}
		own = append(own, cand{at: x.at, f: func() *JobFailure { return s.rankFailure(x) }, rank: x.rank, host: x.host,
			peer: s.out != nil && peerLost(s.out.tail(x.host.label(), x.rank))})
	}
	for _, h := range s.hostFails {
		own = append(own, cand{at: h.f.Time, f: func() *JobFailure { return h.f }, rank: -1, host: h.host})
	}
	if len(own) == 0 {
		first.StoppedAfter = byUs
		return first
	}
	sort.SliceStable(own, func(i, j int) bool { return own[i].at.Before(own[j].at) })
	// Stamps a moment apart cannot be told apart (a busy host stamps an
	// exit late, clocks are known only within bounds): an earliest rank
	// whose failure says a peer went away yields to one that failed on
	// its own within that uncertainty.
	if own[0].peer {
		for i, c := range own[1:] {
			if c.at.Sub(own[0].at) > peerLossWindow+clockUncertainty(own[0].host)+clockUncertainty(c.host) {
				break
			}
			if !c.peer && c.rank >= 0 {
				own[0], own[i+1] = own[i+1], own[0]
				sort.SliceStable(own[1:], func(i, j int) bool { return own[1+i].at.Before(own[1+j].at) })
				break
			}
		}
	}
	root := own[0].f()
	root.hostLost = root.hostLost || first.hostLost
	for _, c := range own[1:] {
		if c.rank >= 0 {
			root.FailedAfter = append(root.FailedAfter, c.rank)
		}
	}
	root.StoppedAfter = byUs
	return root
}

// peerLossWindow is how much later than a peer-loss failure a rank's own
// failure may be stamped and still be taken as its cause: a rank blocked
// in a collective learns within moments that its peer died, but the
// culprit's exit is stamped by its wrapper shell, which a busy host runs
// seconds late (load 16-30 on 2 cores: up to ~5 s seen), and the clocks
// are known only within bounds (added per host).
const peerLossWindow = 10 * time.Second

func clockUncertainty(h *hostRun) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.clock.Uncertainty()
}

// peerLost reports whether a rank's last lines say a peer went away
// (gloo, NCCL, sockets): the rank failed because another one did.
func peerLost(lines []string) bool {
	all := strings.Join(lines, "\n")
	for _, p := range []string{"Connection closed by peer", "Connection reset by peer", "remote process exited", "NCCL communicator was aborted"} {
		if strings.Contains(all, p) {
			return true
		}
	}
	return false
}

func (s *supervisor) rankFailure(x rankExit) *JobFailure {
	var tail []string
	if s.out != nil {
		tail = s.out.tail(x.host.label(), x.rank)
	}
	f := &JobFailure{Job: s.job.Name, Time: x.at, Host: x.host.label(), Rank: x.rank, LocalRank: -1,
		ExitCode: x.code, LastLines: tail}
	for _, r := range x.host.job.Ranks {
		if r.Rank == x.rank {
			f.LocalRank = r.LocalRank
		}
	}
	f.Reason = fmt.Sprintf("exit code %d", x.code)
	if x.code > 128 {
		f.Reason += fmt.Sprintf(" (killed by signal %d?)", x.code-128)
	}
	return f
}

// missingExit is the failure of a host whose agent finished without an
// exit status for one of its ranks (say, a garbled control line).
func missingExit(job job.Job, ev event, exited map[int]bool) *JobFailure {
	for _, r := range ev.host.job.Ranks {
		if !exited[r.Rank] {
			return &JobFailure{Job: job.Name, Time: ev.at, Host: ev.host.label(), Rank: r.Rank, LocalRank: r.LocalRank,
				ExitCode: -1, Reason: "its exit status never arrived (the agent's report was lost); treated as failed"}
		}
	}
	return nil
}

func hostFailure(job job.Job, ev event) *JobFailure {
	f := &JobFailure{Job: job.Name, Time: ev.at, Host: ev.host.label(), Rank: -1, LocalRank: -1, ExitCode: -1}
	switch {
	case errors.Is(ev.err, remote.ErrConnLost):
		f.Reason = ev.err.Error()
		f.hostLost = true
	case ev.err != nil:
		f.Reason = "the agent on the host ended unexpectedly: " + ev.err.Error()
	default:
		f.Reason = "the agent on the host ended before its ranks reported their exit"
	}
	return f
}
