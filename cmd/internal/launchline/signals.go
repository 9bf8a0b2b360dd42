package launchline

import (
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// DefaultStopSignals are the signals that stop a job whatever the line
// says: torchrun's default --signals-to-handle (SIGTERM, SIGINT, SIGHUP,
// SIGQUIT), which its agent forwards to its workers, as the host scripts
// do.
var DefaultStopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT}

// ParseStopSignals reads torchrun's --signals-to-handle: a comma-separated
// list of signal names (SIGTERM,SIGUSR1). It returns the listed signals
// beyond DefaultStopSignals, which stop the job anyway. A name torchrun
// would only warn about (a typo, SIGKILL) is refused: a job that is meant
// to stop cleanly on SIGUSR1 (Slurm's --signal before a preemption) and
// would instead be killed is worse found before it starts.
func ParseStopSignals(flag, list string) ([]os.Signal, error) {
	var extra []os.Signal
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		short, prefixed := strings.CutPrefix(name, "SIG")
		sig, ok := job.StopSignals[short]
		if !ok || !prefixed {
			return nil, cmdutil.InputErrorf("%s %q: %q is not a signal that can stop the job; want a comma-separated list of %s", flag, list, name, strings.Join(stopSignalList(), ", "))
		}
		if !slices.Contains(DefaultStopSignals, os.Signal(sig)) && !slices.Contains(extra, os.Signal(sig)) {
			extra = append(extra, sig)
		}
	}
	return extra, nil
}

// stopSignalList is the names --signals-to-handle takes: Python's signal
// module names (torchrun looks each up with getattr(signal, name)) of the
// signals a host script passes on (job.StopSignals).
func stopSignalList() []string {
	names := job.StopSignalNames()
	for i, n := range names {
		names[i] = "SIG" + n
	}
	return names
}
