package run

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// lossPlan is what an elastic job restarts with when it loses one host of
// its first attempt: the hosts left and the plan on them (or why there is
// none). o is the Options copy the plan was made with, which the attempt
// then probes and renders with.
type lossPlan struct {
	lost string
	left []string
	o    *Options
	c    *plannedCluster
	ch   *PlanChoice
	err  error
}

// planOn plans the job on hosts as an attempt does: planner.Choose on that
// subset, keeping the global batch. A restart (first is the first
// attempt's job, firstDP its data-parallel size; nil for the first
// attempt itself) keeps what the job's checkpoint loads with: a legacy
// Megatron-LM checkpoint the first attempt's TP, PP and layer split, a
// DeepSpeed ZeRO or bf16 one (not universal) its DP, on fewer hosts when
// the GPUs left do not divide by it.
func planOn(opts *Options, er elasticRun, first *job.Job, firstDP int, hosts []string) (*Options, *plannedCluster, *PlanChoice, error) {
	o := *opts
	o.keep, o.pool, o.searched = map[string]bool{}, nil, nil
	for _, h := range hosts {
		o.keep[h] = true
	}
	legacy := first != nil && er.legacy(opts.ScriptArgs)
	if legacy {
		o.ScriptArgs = megatron.KeepModelParallel(opts.ScriptArgs, rankZero(first).Argv)
	}
	var ds *deepspeed.UserConfig
	if first != nil && er.fw == parallel.FrameworkDeepSpeed {
		// Unreadable now: planning says so below.
		if ds, _ = userDSConfig(opts, er.fw); ds != nil && ds.DPFixedBy() != "" {
			o.pinDP = firstDP
		}
	}
	c, ch, _, err := PlanJob(&o, er.fw, er.mode)
	switch {
	case legacy && err != nil:
		err = megatron.LegacyWhy(rankZero(first).Argv, err)
	case o.pinDP > 0 && err != nil:
		err = ds.PinnedWhy(o.pinDP, err)
	case o.pinDP > 0:
		ch.Summary += fmt.Sprintf("; DP %d kept: %s, whose checkpoint DeepSpeed v0.14.4 loads only at the data-parallel size that saved it", o.pinDP, ds.DPFixedBy())
	}
	return &o, c, ch, err
}

// planLoss is the lossPlan for losing host from the first attempt; with
// fewer than MIN hosts left it plans nothing (the job would stop).
func planLoss(opts *Options, er elasticRun, all []string, first *job.Job, firstDP int, host string) lossPlan {
	// The loop's own rule (the next listed host joins when MAX left it out).
	lp := lossPlan{lost: host, left: elastic.HostsLeft(all, host, er.nodes.Max)}
	if len(lp.left) >= er.nodes.Min {
		lp.o, lp.c, lp.ch, lp.err = planOn(opts, er, first, firstDP, lp.left)
	}
	return lp
}

// hostsKey names a set of hosts whatever their order.
func hostsKey(hosts []string) string {
	s := slices.Clone(hosts)
	slices.Sort(s)
	return strings.Join(s, "\x00")
}

// aheadPlans are the plans after each single loss, computed in the
// background once the first attempt is prepared (as Oobleck computes its
// pipeline templates ahead), so that a restart after such a loss starts
// without a new search. The restart takes one only when its hosts are
// exactly those the plan was made for and it is ready; otherwise it plans
// as usual, and never waits for one.
type aheadPlans struct {
	mu    sync.Mutex
	byKey map[string]*lossPlan
	stop  bool
	wg    sync.WaitGroup
	once  sync.Once
	// done, when set, is called once every plan is made (Options.aheadDone).
	done func()
}

// start computes, one host at a time, the plan after losing each host of
// first (all: every host the job may use, in order; firstDP: its
// data-parallel size). It runs once.
func (a *aheadPlans) start(opts *Options, er elasticRun, all []string, first *job.Job, firstDP int) {
	a.once.Do(func() {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			for _, h := range first.Hosts {
				if a.stopped() {
					return
				}
				lp := planLoss(opts, er, all, first, firstDP, h.Name)
				if lp.o == nil || lp.err != nil {
					continue // nothing to reuse: the restart plans (and says why) itself
				}
				a.mu.Lock()
				if a.byKey == nil {
					a.byKey = map[string]*lossPlan{}
				}
				a.byKey[hostsKey(lp.left)] = &lp
				a.mu.Unlock()
			}
			if a.done != nil {
				a.done()
			}
		}()
	})
}

func (a *aheadPlans) stopped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stop
}

// take returns the ready plan made for exactly hosts, nil when there is
// none (yet); each is taken once.
func (a *aheadPlans) take(hosts []string) *lossPlan {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := hostsKey(hosts)
	lp := a.byKey[k]
	delete(a.byKey, k)
	return lp
}

// close stops the computation and waits for the plan in progress (at most
// one search).
func (a *aheadPlans) close() {
	a.mu.Lock()
	a.stop = true
	a.mu.Unlock()
	a.wg.Wait()
}
