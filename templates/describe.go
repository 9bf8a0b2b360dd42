package templates

import (
	"fmt"
	"io"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Describe writes what --dry-run shows: for every host the variables all
// its ranks share, then each rank's own variables and exact command line
// (shell-quoted, so it can be pasted), then every file of the job. Values
// of variables named like secrets (TOKEN, KEY, SECRET, PASSWORD) are shown
// as **** (the ranks get the real value).
func Describe(w io.Writer, j *job.Job) error {
	ew := &errWriter{w: w}
	ranks := 0
	for _, h := range j.Hosts {
		ranks += len(h.Ranks)
	}
	ew.printf("# job %s: %d ranks on %d %s\n", shellquote.Comment(j.Name), ranks, len(j.Hosts), text.Plural(len(j.Hosts), "host", "hosts"))
	for _, warn := range j.Warnings {
		ew.printf("# warning: %s\n", strings.ReplaceAll(warn, "\n", "\n#   "))
	}
	if j.WorkDir != "" {
		ew.printf("# work directory on every host: %s\n", shellquote.Comment(shellquote.Quote(j.WorkDir)))
	}
	labels := job.HostLabels(j.Hosts)
	for i, h := range j.Hosts {
		ew.printf("\n== host %s (address %s, node rank %d, %d ranks) ==\n", labels[i], h.Address, h.NodeRank, len(h.Ranks))
		shared := sharedEnv(h.Ranks)
		ew.printf("env of every rank:\n")
		for _, e := range h.Ranks[0].Env {
			if shared[e.Name] {
				ew.printf("  %s\n", shellquote.Quote(e.Name+"="+ShownValue(e.Name, e.Value)))
			}
		}
		sameCmd := sameArgv(h.Ranks)
		if sameCmd {
			ew.printf("command of every rank:\n  %s\n", shellquote.Join(h.Ranks[0].Argv))
		}
		for _, r := range h.Ranks {
			ew.printf("rank %d (local rank %d):\n  env", r.Rank, r.LocalRank)
			for _, e := range r.Env {
				if !shared[e.Name] {
					ew.printf(" %s", shellquote.Quote(e.Name+"="+ShownValue(e.Name, e.Value)))
				}
			}
			ew.printf("\n")
			if !sameCmd {
				ew.printf("  cmd %s\n", shellquote.Join(r.Argv))
			}
		}
	}
	for _, f := range j.Files {
		ew.printf("\n== file %s (mode %04o) ==\n%s", j.FilePath(f), f.Mode, f.Content)
		if !strings.HasSuffix(string(f.Content), "\n") {
			ew.printf("\n")
		}
	}
	return ew.err
}

func sameArgv(ranks []job.RankJob) bool {
	for _, r := range ranks[1:] {
		if shellquote.Join(r.Argv) != shellquote.Join(ranks[0].Argv) {
			return false
		}
	}
	return true
}

// sharedEnv names the variables with one value on every rank of a host.
func sharedEnv(ranks []job.RankJob) map[string]bool {
	first := map[string]string{}
	for _, e := range ranks[0].Env {
		first[e.Name] = e.Value
	}
	count := map[string]int{}
	for _, r := range ranks {
		for _, e := range r.Env {
			if v, ok := first[e.Name]; ok && v == e.Value {
				count[e.Name]++
			}
		}
	}
	shared := map[string]bool{}
	for name, n := range count {
		if n == len(ranks) && len(ranks) > 1 {
			shared[name] = true
		}
	}
	return shared
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}
