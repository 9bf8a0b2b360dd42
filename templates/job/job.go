// Package job is the launch contract: a Job (its hosts, ranks, files and
// work directory) as rendering produces it and the launcher executes it,
// and the per-host POSIX sh launch script (tmpl/host.sh.tmpl) that starts a
// host's ranks, the same script --output-dir writes and `run` starts as its
// agent. It imports nothing of the project but shell quoting, so the
// launcher can run a job without knowing how it was planned or rendered.
package job

import (
	"fmt"
	"path"
	"slices"
	"syscall"
	"time"
)

// Job is everything needed to start one training job on every host. The
// launcher executes it; --dry-run prints it; --output-dir writes it.
type Job struct {
	// Name identifies the job (used for log and work directory names).
	Name string
	// Hosts in node-rank order.
	Hosts []HostJob
	// Files are uploaded to every host before any rank starts (ds_config.json,
	// hostfile). Paths are relative to FilesDir.
	Files []File
	// FilesDir is the job's own directory for Files (absolute, or
	// relative to WorkDir), created private (mode 0700) and owned by the
	// launching user (FilesRoot, PrivateDirScript): never the launch
	// directory itself, where a generated ds_config.json would overwrite
	// the user's own, or another job's on a shared filesystem. Empty means
	// WorkDir (jobs built by hand).
	FilesDir string
	// WorkDir is the directory on each host where Files land and ranks start.
	WorkDir string
	// Warnings are things the user should know before starting (e.g. a
	// fallback to TCP sockets); rendering still succeeded.
	Warnings []string
	// LogDir, when set, is where each host's launch script writes
	// rank<N>.stdout.log and rank<N>.stderr.log (relative to WorkDir).
	LogDir string
	// StopGrace is the seconds a host script gives its ranks between
	// SIGTERM and SIGKILL when it stops them: run's --stop-grace, written
	// into the scripts (--output-dir writes them to run by hand); 0 is
	// DefaultStopGraceSeconds. Under run the control lines set it again
	// (Control.Grace).
	StopGrace int
}

// DefaultStopGraceSeconds is torchrun's: its agent stops the workers with
// SIGTERM and SIGKILL 30 s later, time a script's SIGTERM handler has to
// save a checkpoint (Megatron-LM's --exit-signal-handler).
const DefaultStopGraceSeconds = 30

// StopGraceSeconds is j.StopGrace, or the default when it is 0.
func (j *Job) StopGraceSeconds() int {
	if j.StopGrace > 0 {
		return j.StopGrace
	}
	return DefaultStopGraceSeconds
}

// StopSignals are the signals a host script passes on to its ranks as it
// got them (torchrun's agent forwards the signal that stopped it), by
// their shell names: those that end a process by default and that it may
// catch, the set torchrun's --signals-to-handle takes. SIGKILL and SIGSTOP
// cannot be caught; SIGPIPE, SIGCHLD and the like are no request to stop.
var StopSignals = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "ALRM": syscall.SIGALRM, "PWR": syscall.SIGPWR,
	"XCPU": syscall.SIGXCPU, "XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM,
}

// StopSignalName is sig's name in StopSignals ("INT"), or TERM's for a
// signal not there: what a stop by sig sends the ranks.
func StopSignalName(sig syscall.Signal) string {
	for name, s := range StopSignals {
		if s == sig {
			return name
		}
	}
	return "TERM"
}

// StopSignalNames are StopSignals' names, sorted.
func StopSignalNames() []string {
	names := make([]string, 0, len(StopSignals))
	for n := range StopSignals {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// GraceSeconds is d in whole seconds for a script's sleep, rounded up: a
// grace of 1.5 s gets 2, and none above 0 becomes 0 (an immediate
// SIGKILL).
func GraceSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// HostJob is one host's part of a job.
type HostJob struct {
	Name     string // as in the cluster file
	Address  string // how the launcher connects (default Name)
	User     string
	Port     int
	NodeRank int
	// Ranks run on this host, in local-rank order.
	Ranks []RankJob
	// Script is a standalone POSIX sh launch script for this host that
	// starts its ranks (what --output-dir writes).
	Script string
}

// RankJob is one process.
type RankJob struct {
	Rank      int
	LocalRank int
	// Env is the full set of variables pipette-launch sets (sorted by name).
	Env []EnvVar
	// Argv is the program and its arguments, unquoted.
	Argv []string
}

// EnvVar is one environment variable.
type EnvVar struct{ Name, Value string }

// File is one file the job needs on every host.
type File struct {
	Path    string
	Mode    uint32
	Content []byte
}

// FilePath is where f lands on every host, as the ranks' argv names it:
// relative to WorkDir, or absolute.
func (j *Job) FilePath(f File) string {
	return path.Join(j.FilesDir, f.Path)
}

// HostLabels name the job's hosts one-to-one: a host's name, or name:port
// where two hosts share a name and differ only by port (containers on one
// machine), so file names and listings never merge them.
func HostLabels(hosts []HostJob) []string {
	count := map[string]int{}
	for _, h := range hosts {
		count[h.Name]++
	}
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.Name
		if count[h.Name] > 1 && h.Port != 0 {
			out[i] = fmt.Sprintf("%s:%d", h.Name, h.Port)
		}
	}
	return out
}
