package elastic

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultRejoinInterval is --rejoin-interval's default. A grow-back
// restart costs the job's start-up (minutes for a large Megatron-LM job
// loading its checkpoint) plus, when the job prints no checkpoint line,
// the steps since its last checkpoint: ten minutes keeps a host that
// flaps every few minutes from costing more than a small share of the
// job's time, and takes a returning host in well within the hours a
// large job runs.
const DefaultRejoinInterval = 10 * time.Minute

// DefaultProbeEvery is how often a host left out is probed while the job
// runs below MAX, each probe bounded by DefaultProbeTimeout: longer than
// the 5 s a check before a restart gets (that one holds the restart up),
// as the probe is a new SSH login whose rc files may take seconds (a
// pyenv set-up rehashes at every login: 6 s of CPU on a busy 2-core
// test-bed host).
const (
	DefaultProbeEvery   = 5 * time.Second
	DefaultProbeTimeout = 30 * time.Second
)

// growBack is why an attempt was stopped on purpose: to take in hosts
// that answer their check again. It is the cause its context is
// cancelled with.
type growBack struct {
	hosts  []string
	reason string
}

func (g *growBack) Error() string {
	return "stopped to take in " + strings.Join(g.hosts, " ") + " (rejoined): " + g.reason
}

// probeResult is one background probe of a host left out.
type probeResult struct {
	host string
	err  error
}

// watchRejoins runs beside an attempt on fewer than MAX hosts: it probes
// the hosts left out (candidates) with Probe every ProbeEvery, each probe bounded by
// ProbeTimeout and never two at once on a host, and once one answers
// stops the attempt (stop, with a *growBack) so that the loop restarts the
// job with it, as torchrun's agent restarts its workers on a membership
// change. The stop comes right after the job's next whole checkpoint (its
// save line) when the job has printed one, else RejoinInterval after the
// host answered; never before the attempt has run RejoinInterval, so that
// grow-back restarts come at most once per interval. It returns when ctx
// is done or it has stopped the attempt.
func (o Options) watchRejoins(ctx context.Context, stop context.CancelCauseFunc, candidates []string) {
	interval, every, timeout := o.RejoinInterval, cmp.Or(o.ProbeEvery, DefaultProbeEvery), cmp.Or(o.ProbeTimeout, DefaultProbeTimeout)
	start := time.Now() // real time: the probes and the timers run on it
	results := make(chan probeResult)
	probing := map[string]bool{}
	var back []string
	probeAll := func() {
		for _, h := range candidates {
			if probing[h] || slices.Contains(back, h) {
				continue
			}
			probing[h] = true
			go func() {
				pctx, cancel := context.WithTimeout(ctx, timeout)
				err := o.Probe(pctx, h)
				cancel()
				select {
				case results <- probeResult{host: h, err: err}:
				case <-ctx.Done():
				}
			}()
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var fallback <-chan time.Time // RejoinInterval after the first host answered
	probeAll()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			probeAll()
		case r := <-results:
			probing[r.host] = false
			if r.err != nil {
				continue
			}
			back = append(back, r.host)
			fmt.Fprintf(o.Out, "pipette-launch: %s answers its check again: the job restarts to take it in after its next checkpoint (or within --rejoin-interval %s)\n", r.host, interval)
			if fallback == nil {
				fallback = time.After(interval)
			}
		case <-o.Steps.savedSignal():
			if n, line := o.Steps.lastSaved(); n > 0 && len(back) > 0 && time.Since(start) >= interval {
				stop(&growBack{hosts: back, reason: "right after the job's checkpoint (" + line + ")"})
				return
			}
		case <-fallback:
			if n, _ := o.Steps.lastSaved(); n == 0 {
				stop(&growBack{hosts: back, reason: fmt.Sprintf("the job printed no checkpoint line within --rejoin-interval %s", interval)})
				return
			}
			// The job prints its checkpoints: the next one's line stops it.
		}
	}
}

// rejoinCandidates are the hosts left out that the job would take in if
// they answered again: none when it runs on MAX hosts already (or growing
// back is off), and never one whose ranks were not confirmed stopped.
func (o Options) rejoinCandidates(running int, left map[string]HostFailure, order []string) []string {
	if o.RejoinInterval <= 0 || o.Probe == nil || (o.Max > 0 && running >= o.Max) {
		return nil
	}
	var out []string
	for _, h := range order {
		if left[h].Cause != NotStopped {
			out = append(out, h)
		}
	}
	return out
}
