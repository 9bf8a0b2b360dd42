package elastic

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Hang is a job stopped by --progress-timeout: it had printed iteration
// lines, then no new step came for Timeout. Silent are the hosts to blame:
// those whose ranks had printed in this attempt and printed nothing for
// Timeout while ranks elsewhere went on printing (a collective waiting on
// them, an NCCL watchdog, a traceback). When every host is silent the
// output says nothing of where the job hangs: nobody is blamed.
type Hang struct {
	Timeout time.Duration
	Step    int // the last new step seen
	Silent  []string
}

func (h *Hang) Error() string {
	s := fmt.Sprintf("no new step for %s (--progress-timeout %s) after step %d", h.Timeout, h.Timeout, h.Step)
	if len(h.Silent) == 0 {
		return s + "; every host silent as long: no host to blame"
	}
	return s + fmt.Sprintf("; %s printed nothing for as long while the others printed on", strings.Join(h.Silent, ", "))
}

// rankPrefix is the "host:rank: " launch puts before each line of a rank.
var rankPrefix = regexp.MustCompile(`^[^:\s]+:(\d+): `)

// progress is what the progress watch knows of one attempt: the host of
// each rank, when each host last printed, and the highest step and when
// it came (-1 until the first iteration line: not watched yet).
type progress struct {
	rankHost map[int]string
	hosts    []string
	hostOut  map[string]time.Time
	step     int
	stepAt   time.Time
}

// Begin starts an attempt of j (its ranks' hosts, and a save line of
// DeepSpeed's that each rank prints): progress and per-rank save lines
// count afresh, and a save signal left from the attempt before is
// dropped. Call it as each attempt starts (launch.Options.Started, or
// Run does). Nil-safe.
func (w *StepWatch) Begin(j *job.Job) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := progress{rankHost: map[int]string{}, hostOut: map[string]time.Time{}, step: -1}
	w.ranks = 0
	for _, h := range j.Hosts {
		p.hosts = append(p.hosts, h.Name)
		for _, r := range h.Ranks {
			p.rankHost[r.Rank] = h.Name
			w.ranks++
		}
	}
	w.prog = p
	clear(w.perTag)
	select {
	case <-w.saved:
	default:
	}
}

// readProgress notes a line's host as printing and a new step (above the
// attempt's highest) as progress. Called with w.mu held.
func (w *StepWatch) readProgress(line []byte, step int, isStep bool) {
	now := w.now()
	if m := rankPrefix.FindSubmatch(line); m != nil {
		if r, err := strconv.Atoi(string(m[1])); err == nil {
			if h, ok := w.prog.rankHost[r]; ok {
				w.prog.hostOut[h] = now
			}
		}
	}
	if isStep && step > w.prog.step {
		w.prog.step, w.prog.stepAt = step, now
	}
}

// hung is the attempt's hang when it printed iteration lines and no new
// step for timeout; nil when not (yet).
func (w *StepWatch) hung(timeout time.Duration) *Hang {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.prog
	now := w.now()
	if p.step < 0 || now.Sub(p.stepAt) < timeout {
		return nil
	}
	h := &Hang{Timeout: timeout, Step: p.step}
	talking := false
	var silent []string
	for _, host := range p.hosts {
		at, printed := p.hostOut[host]
		switch {
		case !printed: // no output, no evidence either way
		case now.Sub(at) < timeout:
			talking = true
		default:
			silent = append(silent, host)
		}
	}
	if talking {
		h.Silent = slices.Clip(silent)
	}
	return h
}

// WatchProgress runs beside a launch whose output goes through w (Begin
// called as each attempt starts): once the attempt has printed an
// iteration line, when no new step comes for timeout it stops the launch
// (stop, with a *Hang). It returns when ctx is done or it stopped it.
func WatchProgress(ctx context.Context, stop context.CancelCauseFunc, w *StepWatch, timeout time.Duration) {
	tick := time.NewTicker(min(max(timeout/10, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if h := w.hung(timeout); h != nil {
				stop(h)
				return
			}
		}
	}
}
