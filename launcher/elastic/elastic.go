package elastic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Options are an elastic job's hosts, bounds and steps.
type Options struct {
	// Name is the job's name, for the summary.
	Name string
	// Hosts are the hosts the job may use, in the order it takes them;
	// Min is the fewest it runs on, Max the most it uses (the first Max of
	// those not left out).
	Hosts    []string
	Min, Max int
	// MaxRestarts is --max-restarts, counted as torchrun counts it: a
	// restart after each failure, whatever failed; leaving out a host that
	// fails its check before an attempt starts costs none.
	MaxRestarts int
	// Prepare is one attempt's job for hosts: the command re-plans and
	// renders for them, probing them first (the health check). An error
	// holding a *remote.HostErrors names the hosts that failed it: they
	// are left out and Prepare is asked again, on the others.
	Prepare func(ctx context.Context, hosts []string) (*Prepared, error)
	// Launch runs one attempt's job (launch.Launch with Options.Restart,
	// Attempt and NoRestarts): restart counts the restarts after failures
	// (TORCHELASTIC_RESTART_COUNT: torchrun's agent counts membership
	// changes in neither it nor max_restarts), attempt every attempt
	// before this one, grow-back restarts included. It returns the
	// attempt's failure (a *launch.JobFailure, or a *remote.HostErrors for
	// hosts it could not start on).
	Launch func(ctx context.Context, j *job.Job, restart, attempt int) error
	// Check is a host's health check (run's: reached over a new SSH
	// connection, then the launch probe's sysfs health check there): nil
	// when nothing is wrong with the host. It is asked after a rank failed
	// there, and before each restart of a host left out as lost or
	// unhealthy (for at most RejoinTimeout, default 5s): one that passes
	// joins again, as torchrun's agent takes in a node at a restart.
	Check         func(ctx context.Context, host string) error
	RejoinTimeout time.Duration
	// RejoinInterval (--rejoin-interval) turns on growing back while the
	// job runs (rejoin.go): while an attempt runs on fewer than Max hosts,
	// the hosts left out are probed with Probe every ProbeEvery, each
	// probe bounded by ProbeTimeout (defaults DefaultProbeEvery,
	// DefaultProbeTimeout), and one that answers is taken in by a restart
	// right after the job's next checkpoint line, else RejoinInterval
	// after it answered; never before the attempt has run RejoinInterval.
	// Such a restart spends no MaxRestarts. 0: a host left out rejoins
	// only at a restart a failure causes; so is a nil Probe (Check, or a
	// check that cannot be made from outside a Slurm job step).
	RejoinInterval, ProbeEvery, ProbeTimeout time.Duration
	// ProgressTimeout (--progress-timeout), with Steps: an attempt that
	// printed iteration lines and then no new step for this long is
	// stopped as hung (WatchProgress) and counted as a failure; 0: off.
	ProgressTimeout time.Duration
	Probe           func(ctx context.Context, host string) error
	// Steps, when not nil, reads the steps each attempt's iteration lines
	// name (the command gives it to Launch as the job's output): the
	// summary then says when each restart's first step came and how many
	// steps it did again.
	Steps *StepWatch
	// Out gets a line as each attempt ends; Now is the clock (tests).
	Out io.Writer
	Now func() time.Time
}

// Prepared is an attempt's job and its layout in one line.
type Prepared struct {
	Job    *job.Job
	Layout string
}

// Cause is why a host was left out.
type Cause string

const (
	// HostLost: the connection dropped or the heartbeat timed out.
	HostLost Cause = "lost"
	// Unhealthy: the host failed its check (unreachable, its launch
	// probe), before an attempt or after a rank failed there.
	Unhealthy Cause = "failed its check"
	// NotStopped: its ranks could not be confirmed stopped; a new attempt
	// next to them would fight over ports and GPUs.
	NotStopped Cause = "not confirmed stopped"
	// Hung: the job made no progress for --progress-timeout and this
	// host's ranks went silent while others printed on.
	Hung Cause = "hung"
)

// HostFailure is a host left out and why.
type HostFailure struct {
	Host   string
	Cause  Cause
	Detail string
}

func (f HostFailure) String() string { return f.Host + " " + string(f.Cause) + ": " + f.Detail }

// Attempt is one start of the job and how it ended.
type Attempt struct {
	Restart int
	Hosts   []string
	Layout  string
	// LeftOut are the hosts left out before this attempt started (failed
	// in an earlier one, or failed their check now).
	LeftOut []HostFailure
	Start   time.Time
	// SinceFailure is the time from the previous attempt's failure to
	// this attempt's start (0 for the first).
	SinceFailure time.Duration
	// Steps are the steps its iteration lines named (Options.Steps; -1
	// when none was seen); FirstStepSinceFailure is the time from the
	// previous attempt's failure to its first iteration line (0 for the
	// first attempt, or when none came).
	Steps                 Steps
	FirstStepSinceFailure time.Duration
	// Failure is what ended it ("" when the job finished); Blamed the
	// hosts it was pinned to. GrewBack: it was stopped on purpose to take
	// in the hosts Rejoined names (no failure: no restart spent).
	Failure  string
	Blamed   []HostFailure
	GrewBack bool
	// Rejoined are the hosts it took in again that an earlier attempt
	// left out.
	Rejoined []string
}

// Summary is every attempt and how the job ended.
type Summary struct {
	Name     string
	Attempts []Attempt
	// Stopped says why the loop gave up ("" when the job finished).
	Stopped string
}

// Run runs the job until it finishes, restarting it on the hosts left
// after each failure. It returns the summary and nil when the job
// finished, else a *StopError (or the failure of an interrupted job, or
// Prepare's error when no job can be made for the hosts left).
func Run(ctx context.Context, o Options) (*Summary, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	s := &Summary{Name: o.Name}
	left := map[string]HostFailure{}
	var leftOrder []string
	leave := func(f HostFailure) {
		if _, ok := left[f.Host]; !ok {
			leftOrder = append(leftOrder, f.Host)
		}
		left[f.Host] = f
	}
	restart := 0 // restarts after failures (--max-restarts)
	var failedAt time.Time
	var rejoined []string // taken in again since the last attempt started
	lastError := ""
	for {
		hosts := usable(o.Hosts, left, o.Max)
		if len(hosts) < o.Min {
			s.Stopped = fmt.Sprintf("%d %s left, fewer than MIN %d of --nnodes %d:%d", len(hosts), plural(len(hosts), "host", "hosts"), o.Min, o.Min, o.Max)
			return s, &StopError{Summary: s}
		}
		prep, err := o.Prepare(ctx, hosts)
		if err != nil {
			failed := hostErrors(err, hosts)
			if len(failed) == 0 || ctx.Err() != nil {
				s.Stopped = "no job for hosts " + strings.Join(hosts, " ") + ": " + err.Error()
				return s, err
			}
			for _, f := range failed {
				f.Cause = Unhealthy
				leave(f)
				fmt.Fprintf(o.Out, "pipette-launch: %s: left out\n", f)
			}
			continue
		}
		a := Attempt{Restart: restart, Hosts: hosts, Layout: prep.Layout, Start: o.Now()}
		for _, h := range rejoined {
			if slices.Contains(hosts, h) {
				a.Rejoined = append(a.Rejoined, h)
			}
		}
		rejoined = nil
		for _, h := range leftOrder {
			a.LeftOut = append(a.LeftOut, left[h])
		}
		if !failedAt.IsZero() {
			a.SinceFailure = a.Start.Sub(failedAt)
		}
		o.Steps.next() // what came before this attempt is not its
		err = o.runAttempt(ctx, prep.Job, restart, len(s.Attempts), o.rejoinCandidates(len(hosts), left, leftOrder))
		a.Steps = o.Steps.next()
		if !failedAt.IsZero() && a.Steps.First >= 0 {
			a.FirstStepSinceFailure = a.Steps.FirstAt.Sub(failedAt)
		}
		if err == nil {
			s.Attempts = append(s.Attempts, a)
			return s, nil
		}
		failedAt = o.Now()
		var jf *launch.JobFailure
		if errors.As(err, &jf) && !jf.Time.IsZero() && jf.Time.Before(failedAt) {
			failedAt = jf.Time // the failure itself, not the end of the stop
		}
		var gb *growBack
		if ctx.Err() == nil && errors.As(err, &gb) {
			// Stopped on purpose: the hosts that answered again rejoin;
			// any whose ranks could not be confirmed stopped stay out.
			a.Failure, a.GrewBack = gb.Error(), true
			if jf != nil {
				a.Blamed = stopBlame(jf, prep.Job, "")
			}
			s.Attempts = append(s.Attempts, a)
			for _, h := range gb.hosts {
				delete(left, h)
				leftOrder = slices.DeleteFunc(leftOrder, func(x string) bool { return x == h })
			}
			rejoined = gb.hosts
			for _, f := range a.Blamed {
				leave(f)
			}
			next := usable(o.Hosts, left, o.Max)
			fmt.Fprintf(o.Out, "pipette-launch: %s; restarting on %d %s (no restart spent: %d of %d done)\n", a.Failure, len(next), plural(len(next), "host", "hosts"), restart, o.MaxRestarts)
			continue
		}
		var v verdict
		var hang *Hang
		switch {
		case ctx.Err() == nil && errors.As(err, &hang):
			v = hangVerdict(hang, jf, prep.Job)
		case ctx.Err() != nil || (jf != nil && jf.Interrupted()):
			a.Failure = "interrupted"
			s.Attempts = append(s.Attempts, a)
			return s, err
		default:
			v = o.judge(ctx, err, prep.Job, lastError)
		}
		a.Failure, a.Blamed = v.what, v.blamed
		s.Attempts = append(s.Attempts, a)
		switch {
		case v.unknown:
			s.Stopped = "a failure pinned to no host: " + err.Error()
			return s, &StopError{Summary: s, Last: err}
		case v.scriptBug != "":
			s.Stopped = v.scriptBug
			return s, &StopError{Summary: s, Last: err}
		case restart >= o.MaxRestarts:
			s.Stopped = fmt.Sprintf("%d %s done, --max-restarts %d", restart, plural(restart, "restart", "restarts"), o.MaxRestarts)
			return s, &StopError{Summary: s, Last: err}
		}
		for _, h := range o.rejoin(ctx, left, leftOrder) {
			delete(left, h)
			leftOrder = slices.DeleteFunc(leftOrder, func(x string) bool { return x == h })
			rejoined = append(rejoined, h)
			fmt.Fprintf(o.Out, "pipette-launch: %s passes its check again: it rejoins\n", h)
		}
		for _, f := range v.blamed {
			leave(f)
		}
		lastError = v.signature
		restart++
		next := usable(o.Hosts, left, o.Max)
		fmt.Fprintf(o.Out, "pipette-launch: %s; restarting on %d %s (restart %d of %d)\n", a.Failure, len(next), plural(len(next), "host", "hosts"), restart, o.MaxRestarts)
	}
}

// runAttempt launches one attempt's job. While it runs, the hosts in
// candidates are watched for a return (watchRejoins) and, with
// ProgressTimeout, the job's steps for a hang (WatchProgress): either
// stops it, and the error returned wraps why (a *growBack, a *Hang).
func (o Options) runAttempt(ctx context.Context, j *job.Job, restart, attempt int, candidates []string) error {
	o.Steps.Begin(j)
	var watch []func(context.Context, context.CancelCauseFunc)
	if len(candidates) > 0 {
		watch = append(watch, func(ctx context.Context, stop context.CancelCauseFunc) { o.watchRejoins(ctx, stop, candidates) })
	}
	if o.ProgressTimeout > 0 && o.Steps != nil {
		watch = append(watch, func(ctx context.Context, stop context.CancelCauseFunc) {
			WatchProgress(ctx, stop, o.Steps, o.ProgressTimeout)
		})
	}
	if len(watch) == 0 {
		return o.Launch(ctx, j, restart, attempt)
	}
	actx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	for _, w := range watch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w(actx, stop)
		}()
	}
	err := o.Launch(actx, j, restart, attempt)
	cause := context.Cause(actx)
	stop(nil)
	wg.Wait()
	return StoppedWhy(ctx, err, cause)
}

// StoppedWhy is a launch's error err, wrapping why a watch stopped it
// (cause, the cause its context was cancelled with: a *Hang, or a
// grow-back) when that is what ended it: not when ctx (the caller's) was
// cancelled, nor when a failure came first (a rank failing as it was
// stopped).
func StoppedWhy(ctx context.Context, err, cause error) error {
	var gb *growBack
	var h *Hang
	if err == nil || ctx.Err() != nil || !(errors.As(cause, &gb) || errors.As(cause, &h)) {
		return err
	}
	var jf *launch.JobFailure
	if errors.As(err, &jf) && !jf.Interrupted() {
		return err
	}
	return fmt.Errorf("%w: %w", cause, err)
}

// rejoin are the hosts left out as lost or unhealthy that pass their
// check now (checked at once, each for at most RejoinTimeout). A host whose
// ranks were not confirmed stopped stays out: they may still run.
func (o Options) rejoin(ctx context.Context, left map[string]HostFailure, order []string) []string {
	if o.Check == nil {
		return nil
	}
	timeout := o.RejoinTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok := make([]bool, len(order))
	var wg sync.WaitGroup
	for i, h := range order {
		if left[h].Cause == NotStopped {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok[i] = o.Check(ctx, h) == nil
		}()
	}
	wg.Wait()
	var back []string
	for i, h := range order {
		if ok[i] {
			back = append(back, h)
		}
	}
	return back
}

// HostsLeft are the hosts the loop restarts on after losing lost, when
// nothing else is left out: usable's rule, so that a plan made ahead for
// that loss is made for exactly the hosts the restart gets.
func HostsLeft(hosts []string, lost string, max int) []string {
	return usable(hosts, map[string]HostFailure{lost: {Host: lost}}, max)
}

// usable are the first max hosts not left out, in order.
func usable(hosts []string, left map[string]HostFailure, max int) []string {
	var out []string
	for _, h := range hosts {
		if _, ok := left[h]; !ok && (max <= 0 || len(out) < max) {
			out = append(out, h)
		}
	}
	return out
}

// verdict is what one attempt's failure says.
type verdict struct {
	what      string
	blamed    []HostFailure
	signature string // the failing rank's error, to compare across attempts
	scriptBug string // why this is the script's own bug ("" when not)
	unknown   bool   // pinned to no host and no rank
}

// judge reads an attempt's failure: a lost host or hosts whose ranks were
// not confirmed stopped are blamed; a failing rank's host is checked and
// blamed when unhealthy, else the failure is the script's own bug when it
// repeats the previous attempt's error or is rank 0's (torchrun would
// burn every restart on it).
func (o Options) judge(ctx context.Context, err error, j *job.Job, lastError string) verdict {
	var jf *launch.JobFailure
	if !errors.As(err, &jf) {
		if failed := hostErrors(err, hostNames(j)); len(failed) > 0 {
			for i := range failed {
				failed[i].Cause = Unhealthy
			}
			return verdict{what: "could not start on " + names(failed), blamed: failed}
		}
		return verdict{what: err.Error(), unknown: true}
	}
	v := verdict{what: headline(jf)}
	lost := ""
	if jf.HostLost() {
		if h, ok := hostOf(j, jf.Host); ok {
			lost = h
			v.blamed = append(v.blamed, HostFailure{Host: h, Cause: HostLost, Detail: jf.Reason})
		}
	}
	v.blamed = append(v.blamed, stopBlame(jf, j, lost)...)
	if jf.Rank >= 0 {
		h, ok := hostOf(j, jf.Host)
		if ok && o.Check != nil {
			if cerr := o.Check(ctx, h); cerr != nil {
				v.blamed = append(v.blamed, HostFailure{Host: h, Cause: Unhealthy, Detail: cerr.Error()})
				return v
			}
		}
		v.signature = errorSignature(jf)
		switch {
		case lastError != "" && v.signature == lastError:
			v.scriptBug = fmt.Sprintf("the script's own bug: rank %d failed with the same error as in the attempt before (%s), and nothing is wrong with %s", jf.Rank, v.signature, jf.Host)
		case jf.Rank == 0 && jf.ExitCode > 0 && jf.ExitCode < 128:
			v.scriptBug = fmt.Sprintf("the script's own bug: rank 0 exited %d by itself (%s), and nothing is wrong with %s", jf.ExitCode, v.signature, jf.Host)
		}
	}
	if len(v.blamed) == 0 && jf.Rank < 0 {
		v.unknown = true
	}
	return v
}

// hangVerdict reads a hang (--progress-timeout): the hosts that went
// silent while others printed on are blamed; when every host went silent
// nobody is, and the job restarts on the same hosts (a transient failure).
func hangVerdict(h *Hang, jf *launch.JobFailure, j *job.Job) verdict {
	v := verdict{what: "the job hung: " + h.Error()}
	for _, host := range h.Silent {
		v.blamed = append(v.blamed, HostFailure{Host: host, Cause: Hung,
			Detail: fmt.Sprintf("its ranks printed nothing for %s while the others printed on", h.Timeout)})
	}
	if jf != nil {
		v.blamed = append(v.blamed, stopBlame(jf, j, "")...)
	}
	return v
}

// stopBlame are the hosts the stop of an attempt could not confirm
// stopped (jf.StopErr), but lost (said already when lost names it).
func stopBlame(jf *launch.JobFailure, j *job.Job, lost string) []HostFailure {
	var out []HostFailure
	if jf.StopErr == nil {
		return nil
	}
	for _, f := range hostErrors(jf.StopErr, hostNames(j)) {
		switch {
		case f.Host == lost: // a lost host cannot confirm it: said already
		case f.Cause == HostLost:
			// Lost too (not reached to stop it): its agent stops its
			// ranks, so it may rejoin once it passes its check.
			out = append(out, f)
		default:
			f.Cause = NotStopped
			out = append(out, f)
		}
	}
	return out
}

// headline is a failure in one line.
func headline(jf *launch.JobFailure) string {
	switch {
	case jf.Rank >= 0:
		return fmt.Sprintf("rank %d on %s failed: %s", jf.Rank, jf.Host, jf.Reason)
	case jf.Host != "":
		return fmt.Sprintf("host %s failed: %s", jf.Host, jf.Reason)
	}
	return jf.Reason
}

// errorSignature is a rank's failure as compared across attempts: its
// exit code and its last line of output (a traceback's exception line).
func errorSignature(jf *launch.JobFailure) string {
	last := ""
	for i := len(jf.LastLines) - 1; i >= 0 && last == ""; i-- {
		last = strings.TrimSpace(jf.LastLines[i])
	}
	return "exit " + strconv.Itoa(jf.ExitCode) + ": " + last
}

// hostErrors are the hosts of hosts named in err's *remote.HostErrors;
// those whose connection is lost (remote.ErrConnLost) have Cause HostLost.
func hostErrors(err error, hosts []string) []HostFailure {
	var he *remote.HostErrors
	if !errors.As(err, &he) {
		return nil
	}
	var out []HostFailure
	for _, e := range he.Errs {
		for _, h := range hosts {
			if sameHost(e.Host, h) && !slices.ContainsFunc(out, func(f HostFailure) bool { return f.Host == h }) {
				f := HostFailure{Host: h, Detail: e.Err.Error()}
				if errors.Is(e.Err, remote.ErrConnLost) {
					f.Cause = HostLost
				}
				out = append(out, f)
			}
		}
	}
	return out
}

// sameHost: s (a target as a failure names it: [user@]name[:port]) is host.
func sameHost(s, host string) bool {
	if s == host {
		return true
	}
	if _, after, ok := strings.Cut(s, "@"); ok {
		s = after
	}
	if i := strings.LastIndex(s, ":"); i > 0 && !strings.Contains(s[:i], ":") {
		s = s[:i]
	}
	return s == host
}

// hostOf is the job's host (by name) that a failure's host string names.
func hostOf(j *job.Job, s string) (string, bool) {
	labels := job.HostLabels(j.Hosts)
	for i, h := range j.Hosts {
		if labels[i] == s || sameHost(s, h.Name) {
			return h.Name, true
		}
	}
	return "", false
}

func hostNames(j *job.Job) []string {
	out := make([]string, len(j.Hosts))
	for i, h := range j.Hosts {
		out[i] = h.Name
	}
	return out
}

func names(fs []HostFailure) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Host)
	}
	return strings.Join(out, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StopError is an elastic job that stopped without finishing: its summary
// and the last attempt's failure.
type StopError struct {
	Summary *Summary
	Last    error
}

func (e *StopError) Error() string {
	var b strings.Builder
	b.WriteString(e.Summary.String())
	if e.Last != nil {
		b.WriteString("\nlast failure:\n")
		b.WriteString(e.Last.Error())
	}
	return b.String()
}

func (e *StopError) Unwrap() error { return e.Last }

// String is the summary: how the job ended, then each attempt.
func (s *Summary) String() string {
	var b strings.Builder
	name := s.Name
	if name == "" {
		name = "job"
	}
	n := len(s.Attempts)
	if s.Stopped == "" {
		last := s.Attempts[n-1]
		grew := ""
		if g := s.growBacks(); g > 0 {
			grew = fmt.Sprintf(" and %d grow-back %s", g, plural(g, "restart", "restarts"))
		}
		fmt.Fprintf(&b, "%s: finished on %d %s after %d %s%s\n", name, len(last.Hosts), plural(len(last.Hosts), "host", "hosts"), last.Restart, plural(last.Restart, "restart", "restarts"), grew)
	} else {
		fmt.Fprintf(&b, "%s STOPPED: %s\n", name, s.Stopped)
	}
	var prev *Attempt
	for i := range s.Attempts {
		a := &s.Attempts[i]
		fmt.Fprintf(&b, "  attempt %d (restart %d): %d %s: %s\n", i+1, a.Restart, len(a.Hosts), plural(len(a.Hosts), "host", "hosts"), strings.Join(a.Hosts, " "))
		if prev == nil || prev.Layout != a.Layout {
			fmt.Fprintf(&b, "    layout     : %s\n", a.Layout)
		}
		if prev != nil {
			dropped, added := diff(prev.Hosts, a.Hosts)
			if len(dropped) > 0 {
				fmt.Fprintf(&b, "    dropped    : %s\n", strings.Join(dropped, " "))
			}
			for i, h := range added {
				if slices.Contains(a.Rejoined, h) {
					added[i] += " (rejoined)"
				}
			}
			if len(added) > 0 {
				fmt.Fprintf(&b, "    added      : %s\n", strings.Join(added, ", "))
			}
			since := "the failure"
			if prev.GrewBack {
				since = "the stop"
			}
			fmt.Fprintf(&b, "    started    : %s after %s\n", a.SinceFailure.Round(100*time.Millisecond), since)
			if a.Steps.First >= 0 {
				fmt.Fprintf(&b, "    first step : %s after %s (step %d)\n", a.FirstStepSinceFailure.Round(100*time.Millisecond), since, a.Steps.First)
			}
			if r, ok := redone(prev.Steps, a.Steps); ok {
				fmt.Fprintf(&b, "    redone     : %d %s (the attempt before printed step %d last, this one step %d first)\n", r, plural(r, "step", "steps"), prev.Steps.Last, a.Steps.First)
			}
		}
		for _, f := range a.LeftOut {
			if prev == nil || !(hasHost(prev.LeftOut, f.Host) || hasHost(prev.Blamed, f.Host)) {
				fmt.Fprintf(&b, "    left out   : %s\n", f)
			}
		}
		switch {
		case a.Failure == "":
			b.WriteString("    ended      : finished\n")
		default:
			fmt.Fprintf(&b, "    ended      : %s\n", a.Failure)
			for _, f := range a.Blamed {
				fmt.Fprintf(&b, "    blamed     : %s\n", f)
			}
		}
		prev = a
	}
	return strings.TrimRight(b.String(), "\n")
}

// growBacks counts the attempts stopped to take in hosts again.
func (s *Summary) growBacks() int {
	n := 0
	for _, a := range s.Attempts {
		if a.GrewBack {
			n++
		}
	}
	return n
}

// redone is how many steps an attempt did again that the one before had
// done (by their iteration lines: a job that prints every k-th step may
// have redone up to k-1 more), when both printed any.
func redone(before, after Steps) (int, bool) {
	if before.Last < 0 || after.First < 0 {
		return 0, false
	}
	return max(0, before.Last-after.First+1), true
}

func hasHost(fs []HostFailure, host string) bool {
	return slices.ContainsFunc(fs, func(f HostFailure) bool { return f.Host == host })
}

// diff: hosts of a missing from b, and of b missing from a.
func diff(a, b []string) (dropped, added []string) {
	for _, h := range a {
		if !slices.Contains(b, h) {
			dropped = append(dropped, h)
		}
	}
	for _, h := range b {
		if !slices.Contains(a, h) {
			added = append(added, h)
		}
	}
	return dropped, added
}
