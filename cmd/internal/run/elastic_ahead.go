package run

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pipette-launch/pipette-launch/launcher/elastic"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
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
	c, ch, _, err := planValidWorld(&o, er.fw, er.mode, er.nodes.Min)
	if c != nil && err == nil { // the hosts it runs on: fewer for a DeepSpeed elasticity section
		o.keep = map[string]bool{}
		for _, h := range c.Hosts {
			o.keep[h.Name] = true
		}
	}
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

// planValidWorld is PlanJob for an elastic job (min: --nnodes' MIN; 0
// for a job of fixed size, planned as it is): when DeepSpeed's elasticity
// section refuses the world size of all o's hosts
// (deepspeed.InvalidWorldError), the fewest hosts are left out, the
// earliest kept and at least min of them, for the largest world size it
// accepts (elastic.KeepForWorld), and the summary names the hosts left
// idle and why. The cluster returned has the hosts kept.
func planValidWorld(o *Options, fw parallel.Framework, mode fabric.Mode, min int) (*plannedCluster, *PlanChoice, bool, error) {
	c, ch, planned, err := PlanJob(o, fw, mode)
	if err == nil && ch != nil && ch.Plan != nil {
		// A pinned DP may fit only fewer hosts (the search leaves the
		// others idle): MIN counts the hosts that run ranks.
		if n := hostsRunning(ch.Plan); n < min {
			err = fmt.Errorf("the plan runs ranks on %d of the hosts %s, fewer than --nnodes' MIN %d", n, strings.Join(hostNames(c), " "), min)
		}
	}
	if err != nil && min > 0 && planned && !o.UseAllGPUs {
		if kc, kch, ok := planWithIdleHosts(o, fw, mode, min); ok {
			return kc, kch, planned, nil
		}
	}
	var bad *deepspeed.InvalidWorldError
	if min == 0 || c == nil || !errors.As(err, &bad) {
		return c, ch, planned, err
	}
	ranks := make([]int, len(c.Hosts))
	for i, h := range c.Hosts {
		ranks[i] = h.GPUs
	}
	var kc *plannedCluster
	var kch *PlanChoice
	kept, ok := elastic.KeepForWorld(ranks, min, func(idx []int) bool {
		k := *o
		k.keep = map[string]bool{}
		for _, i := range idx {
			k.keep[c.Hosts[i].Name] = true
		}
		var err error
		if kc, kch, _, err = PlanJob(&k, fw, mode); err != nil {
			return false
		}
		o.searched = k.searched
		return true
	})
	if !ok {
		return c, ch, planned, fmt.Errorf("%w; no world size it accepts is left with at least MIN %d of the hosts %s (DeepSpeed would refuse to start): change the elasticity section or the hosts", err, min, strings.Join(hostNames(c), " "))
	}
	var idle []string
	for i, h := range c.Hosts {
		if !slices.Contains(kept, i) {
			idle = append(idle, h.Name)
		}
	}
	kch.Summary += fmt.Sprintf("; leaves %s idle: DeepSpeed's elasticity section accepts world sizes %v, not the %d of all %d hosts", strings.Join(idle, ", "), bad.Valid, bad.World, len(c.Hosts))
	return kc, kch, planned, nil
}

// planWithIdleHosts plans an elastic attempt whose hosts no plan uses
// whole (the GPUs left after a loss rarely divide as the first attempt's
// did: 127 hosts of 8 GPUs and a global batch of 1,024 have no layout on
// all 1,016), as the search does without --nnodes: on the hosts that give
// the fastest plan, the others named idle and why. It takes it only when
// at least min hosts run ranks (--nnodes' MIN).
func planWithIdleHosts(o *Options, fw parallel.Framework, mode fabric.Mode, min int) (*plannedCluster, *PlanChoice, bool) {
	k := *o
	k.idleOK = true
	c, ch, _, err := PlanJob(&k, fw, mode)
	if err != nil || ch.Plan == nil {
		return nil, nil, false
	}
	if hostsRunning(ch.Plan) < min {
		return nil, nil, false
	}
	o.searched = k.searched
	return c, ch, true
}

// hostsRunning is how many hosts run ranks of p.
func hostsRunning(p *search.Plan) int {
	used := map[int]bool{}
	for _, r := range p.Placement {
		used[r.HostIndex] = true
	}
	return len(used)
}

// hostNames are c's hosts' names, in order.
func hostNames(c *plannedCluster) []string {
	var out []string
	for _, h := range c.Hosts {
		out = append(out, h.Name)
	}
	return out
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
