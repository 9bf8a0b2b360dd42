package launch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/text"
)

// JobFailure is why a job stopped: the first failure observed. Its message
// is a torchrun-like summary.
type JobFailure struct {
	Job       string
	Time      time.Time
	Host      string // empty when interrupted
	Rank      int    // -1 when no rank is to blame (host lost, interrupted)
	LocalRank int
	ExitCode  int // -1 when no rank exited
	Reason    string
	LastLines []string
	Restarts  int   // restarts done before this failure
	StopErr   error // ranks that could not be confirmed stopped
	// FailedAfter are the ranks that failed on their own after this one
	// (usually the cascade it caused), earliest first; StoppedAfter counts
	// the ranks that ended non-zero once pipette-launch stopped them.
	FailedAfter  []int
	StoppedAfter int

	interrupted bool
	hostLost    bool
}

// NewHostLost is the failure Launch returns for a host it lost (HostLost
// reports true), for callers that stand in for Launch: the elastic
// loop's tests and a launcher that supervises hosts another way.
func NewHostLost(jobName, host, reason string, at time.Time) *JobFailure {
	return &JobFailure{Job: jobName, Time: at, Host: host, Rank: -1, LocalRank: -1, ExitCode: -1, Reason: reason, hostLost: true}
}

// NewInterrupted is the failure Launch returns for a job stopped by its
// context (Interrupted reports true; reason says why), for a launcher that
// supervises hosts another way (launcher/kubernetes): the elastic loop
// reads a stop it asked for (a hang, a grow-back) from it.
func NewInterrupted(jobName, reason string, at time.Time) *JobFailure {
	return &JobFailure{Job: jobName, Time: at, Rank: -1, LocalRank: -1, ExitCode: -1, Reason: reason, interrupted: true}
}

// Interrupted reports whether the job was stopped by cancellation (signal).
func (f *JobFailure) Interrupted() bool { return f.interrupted }

// HostLost reports whether the failure is a lost connection to a host.
func (f *JobFailure) HostLost() bool { return f.hostLost }

// restartable: a rank failed and every rank was confirmed stopped (a
// restart next to survivors of the last attempt would fight over ports and
// GPUs).
func (f *JobFailure) restartable() bool { return !f.interrupted && !f.hostLost && f.StopErr == nil }

func (f *JobFailure) headline() string {
	switch {
	case f.Rank >= 0:
		return fmt.Sprintf("rank %d (local_rank %d) on %s failed: %s", f.Rank, f.LocalRank, f.Host, f.Reason)
	case f.Host != "":
		return fmt.Sprintf("host %s failed: %s", f.Host, f.Reason)
	}
	return f.Reason
}

func (f *JobFailure) Error() string {
	var b strings.Builder
	name := f.Job
	if name == "" {
		name = "job"
	}
	fmt.Fprintf(&b, "%s FAILED: %s\n", name, f.headline())
	b.WriteString("Root Cause (earliest failure, by each host's clock corrected to ours):\n")
	fmt.Fprintf(&b, "  time      : %s\n", f.Time.UTC().Format("2006-01-02_15:04:05.000"))
	if f.Host != "" {
		fmt.Fprintf(&b, "  host      : %s\n", f.Host)
	}
	if f.Rank >= 0 {
		fmt.Fprintf(&b, "  rank      : %d (local_rank: %d)\n", f.Rank, f.LocalRank)
	}
	if f.ExitCode >= 0 {
		fmt.Fprintf(&b, "  exitcode  : %d\n", f.ExitCode)
	}
	fmt.Fprintf(&b, "  reason    : %s\n", f.Reason)
	if a := f.after(); a != "" {
		fmt.Fprintf(&b, "  after it  : %s\n", a)
	}
	if f.Restarts > 0 {
		fmt.Fprintf(&b, "  restarts  : %d\n", f.Restarts)
	}
	if len(f.LastLines) > 0 {
		fmt.Fprintf(&b, "  last %d lines of output:\n", len(f.LastLines))
		for _, l := range f.LastLines {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	if f.StopErr != nil {
		fmt.Fprintf(&b, "  WARNING   : %v\n", f.StopErr)
	} else {
		b.WriteString("  every rank on every host was stopped\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// after says how many ranks failed after the root cause.
func (f *JobFailure) after() string {
	var parts []string
	if n := len(f.FailedAfter); n > 0 {
		ranks := make([]string, 0, min(n, 8))
		for _, r := range f.FailedAfter[:min(n, 8)] {
			ranks = append(ranks, strconv.Itoa(r))
		}
		list := strings.Join(ranks, ", ")
		if n > 8 {
			list += ", ..."
		}
		parts = append(parts, fmt.Sprintf("%d more %s failed on %s own (%s %s)", n, text.Plural(n, "rank", "ranks"), text.Plural(n, "its", "their"), text.Plural(n, "rank", "ranks"), list))
	}
	if n := f.StoppedAfter; n > 0 {
		parts = append(parts, fmt.Sprintf("%d %s when pipette-launch stopped the job", n, text.Plural(n, "rank ended non-zero", "ranks ended non-zero")))
	}
	return strings.Join(parts, "; ")
}
