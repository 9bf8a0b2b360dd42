package search

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

// Plans on fewer hosts than the cluster has. A layout must use every GPU it
// is given (TP x PP x CP x DP = GPUs, with DP dividing the global batch), so
// 80 GPUs with a global batch of 1,024 have no data-parallel layout at all,
// and on islands joined by slow links the fastest plan may leave an island
// out (Sailor's planner leaves GPUs idle for both reasons). The search
// ranks the hosts best first and tries prefixes of that ranking:
//
//   - islands by GPU speed, then by how well each joins those already kept,
//     so a prefix drops the slowest or worst-connected islands first;
//   - inside the ranking, host counts where a layout with at most half the
//     model-parallel size (TP x CP x PP, so a larger DP) becomes possible
//     than on any larger prefix: on identical hosts the number used
//     matters, not which.
//
// A prefix's search places only the configs whose placement-free lower
// bound (and quick estimate, within the search's usual slack) beat the best
// plan found so far, so clusters where every GPU pays pay little extra.

// addFewerHosts merges the plans of the host prefixes worth searching into
// the whole cluster's result (res, err), fastest first.
func addFewerHosts(c *cluster.Cluster, m model.Model, o Options, res *Result, err error) (*Result, error) {
	var nf *NoFitError
	if errors.As(err, &nf) || (err != nil && checkSearchInput(c, m, o) != nil) {
		return res, err // fewer GPUs hold no more; bad input stays bad
	}
	best := math.Inf(1)
	if res != nil && len(res.Plans) > 0 {
		best = res.Plans[0].Predicted.IterationSeconds
	}
	order := hostRanking(c)
	total := c.TotalGPUs()
	floor := 1 // no layout fit on every host: any model-parallel size may
	if res != nil && res.fitMP > 0 {
		floor = res.fitMP
	}
	var found []*Result
	for _, n := range prefixSizes(c, m, o, order, floor) {
		o1 := o
		o1.TopK, o1.beat, o1.noComparison = 1, best, true
		r, e := searchEveryHost(c.Keep(order[:n]), m, o1)
		if e != nil || len(r.Plans) == 0 || r.Plans[0].Predicted.IterationSeconds >= best {
			continue
		}
		idle := idleHosts(c, order[n:], total, r.Plans[0].Predicted.IterationSeconds, res, err)
		for i := range r.Plans {
			p := &r.Plans[i]
			for k := range p.Placement {
				p.Placement[k].HostIndex = order[p.Placement[k].HostIndex]
			}
			p.Idle = idle
		}
		found = append(found, r)
		best = math.Min(best, r.Plans[0].Predicted.IterationSeconds)
	}
	if len(found) == 0 {
		return res, err
	}
	if res == nil {
		res = &Result{Model: found[0].Model}
	}
	for _, r := range found {
		res.Considered += r.Considered
		res.RejectedMemory += r.RejectedMemory
		res.Plans = append(res.Plans, r.Plans...)
	}
	res.Plans = fastestFirst(res.Plans, o.TopK)
	return res, nil
}

// idleHosts names the hosts a prefix plan leaves out and why: no layout
// uses every GPU (whole's error), or the prefix's best plan (secs) is
// faster than the whole cluster's.
func idleHosts(c *cluster.Cluster, left []int, total int, secs float64, whole *Result, wholeErr error) *IdleHosts {
	idle := &IdleHosts{}
	for _, h := range left {
		idle.Hosts = append(idle.Hosts, c.Hosts[h].Name)
		idle.GPUs += c.Hosts[h].GPUs
	}
	used := total - idle.GPUs
	if whole == nil || len(whole.Plans) == 0 {
		idle.Reason = fmt.Sprintf("no layout uses all %d GPUs (%v); planned on %d", total, wholeErr, used)
	} else {
		idle.Reason = fmt.Sprintf("faster on %d of the %d GPUs: %.3f s/iteration predicted, against %.3f s for the best plan using all of them",
			used, total, secs, whole.Plans[0].Predicted.IterationSeconds)
	}
	return idle
}

// hostRanking orders the hosts best first: island by island (islandRanking),
// each island's hosts in the cluster's order.
func hostRanking(c *cluster.Cluster) []int {
	var out []int
	for _, isl := range islandRanking(c) {
		out = append(out, c.Islands[isl].Hosts...)
	}
	return out
}

// islandRanking orders the islands that have hosts: the fastest GPU first
// (more GPUs, then better links to the others breaking ties), then
// repeatedly the fastest GPU among the rest, ties going to the island with
// the best slowest link to those already ranked.
func islandRanking(c *cluster.Cluster) []int {
	var left []int
	for i, is := range c.Islands {
		if len(is.Hosts) > 0 {
			left = append(left, i)
		}
	}
	speed := func(i int) float64 { return gpu.PeakFLOPS(c.Hosts[c.Islands[i].Hosts[0]].GPU) }
	link := func(a, b int) float64 {
		return c.LinkBetween(c.Islands[a].Hosts[0], c.Islands[b].Hosts[0]).BytesPerS
	}
	joins := func(i int, to []int) float64 { // the slowest link from i to the islands in to
		w := math.Inf(1)
		for _, j := range to {
			w = math.Min(w, link(i, j))
		}
		return w
	}
	var out []int
	for len(left) > 0 {
		bestK := 0
		for k := 1; k < len(left); k++ {
			i, b := left[k], left[bestK]
			si, sb := speed(i), speed(b)
			if si != sb {
				if si > sb {
					bestK = k
				}
				continue
			}
			to := out
			if len(out) == 0 { // the first: most GPUs, then best joined to all others
				if gi, gb := islandGPUs(c, i), islandGPUs(c, b); gi != gb {
					if gi > gb {
						bestK = k
					}
					continue
				}
				to = left
			}
			if joins(i, without(to, i)) > joins(b, without(to, b)) {
				bestK = k
			}
		}
		out = append(out, left[bestK])
		left = slices.Delete(left, bestK, bestK+1)
	}
	return out
}

func islandGPUs(c *cluster.Cluster, i int) int {
	n := 0
	for _, h := range c.Islands[i].Hosts {
		n += c.Hosts[h].GPUs
	}
	return n
}

func without(xs []int, x int) []int {
	var out []int
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// prefixSizes are the host counts, largest first and below the whole
// cluster, worth searching: each island boundary of the ranking, and below
// each boundary (down to half its hosts) every count where a
// model-parallel size at most half the smallest on more hosts, no smaller
// than floor (the smallest that fit memory on every host: fewer hosts hold
// no more), first becomes possible: twice the data parallelism per model
// copy, not a stage or two fewer.
func prefixSizes(c *cluster.Cluster, m model.Model, o Options, order []int, floor int) []int {
	var bounds []int
	n := 0
	for _, isl := range islandRanking(c) {
		n += len(c.Islands[isl].Hosts)
		bounds = append(bounds, n)
	}
	seen := map[int]bool{len(order): true}
	var out []int
	add := func(k int) {
		if k > 0 && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, b := range bounds {
		add(b)
		least := smallestModelParallel(c, m, o, order[:b], floor)
		for k := b - 1; k >= (b+1)/2; k-- {
			if mp := smallestModelParallel(c, m, o, order[:k], floor); mp > 0 && (least == 0 || 2*mp <= least) {
				add(k)
				least = mp
			}
		}
	}
	slices.SortFunc(out, func(a, b int) int { return b - a })
	return out
}

// smallestModelParallel is the smallest TP x CP x PP, at least floor, of a
// layout on the given hosts that meets the user's pins and divides the
// global batch by DP (0: none). It is arithmetic only: enumerate decides
// the rest.
func smallestModelParallel(c *cluster.Cluster, m model.Model, o Options, hosts []int, floor int) int {
	world, perHost := 0, 0
	for _, h := range hosts {
		world += c.Hosts[h].GPUs
		perHost = gcd(perHost, c.Hosts[h].GPUs)
	}
	fx := o.Fixed
	best := 0
	for _, tp := range pick(fx.TP, divisors(perHost, perHost)) {
		cp := max(fx.CP, 1)
		for pp := 1; pp <= m.NumLayers; pp++ {
			if fx.PP > 0 && pp != fx.PP {
				continue
			}
			mp := tp * cp * pp
			if mp < floor || world%mp != 0 {
				continue
			}
			dp := world / mp
			if o.GlobalBatch%dp != 0 || (fx.DP > 0 && dp != fx.DP) {
				continue
			}
			if best == 0 || mp < best {
				best = mp
			}
		}
	}
	return best
}

// memoryFloor is the model-parallel size (TP x CP x PP) below which
// nothing fit memory: one above the largest size of a config over memory
// (overMP) that is below every fitting config's; 1 when no such size was
// tried. Fewer hosts hold no more, so the search on fewer hosts looks at
// no layout below it.
func memoryFloor(cands []candidate, overMP map[int]bool) int {
	fit := 0
	for _, k := range cands {
		fit = minPositive(fit, k.cfg.TP*k.cfg.CP*k.cfg.PP)
	}
	floor := 1
	for mp := range overMP {
		if mp < fit {
			floor = max(floor, mp+1)
		}
	}
	return floor
}

// minPositive is the smaller of a and b, where 0 means unset.
func minPositive(a, b int) int {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// errNothingBeats: no config of a search given Options.beat can beat it.
var errNothingBeats = errors.New("no configuration beats the plan to beat")

// promising keeps the candidates that may beat an iteration time of beat:
// lower bound below it, quick estimate within minQuickSlack of it (the cut
// placeRanked makes against its own best plans).
func promising(cands []candidate, beat float64) []candidate {
	var out []candidate
	for _, k := range cands {
		if k.lb < beat && k.quick <= beat*(1+minQuickSlack) {
			out = append(out, k)
		}
	}
	return out
}

// OnUsedHosts is c narrowed to the hosts p places ranks on, and p with its
// placement re-indexed to that cluster: how a plan that leaves hosts idle
// is priced again (its timeline, what-if schedules), as the search priced
// it. A plan that uses every host comes back with c as it is.
func OnUsedHosts(c *cluster.Cluster, p *Plan) (*cluster.Cluster, *Plan) {
	if p.Idle == nil {
		return c, p
	}
	index := map[int]int{}
	var used []int
	for _, r := range p.Placement {
		if _, ok := index[r.HostIndex]; !ok {
			index[r.HostIndex] = -1
			used = append(used, r.HostIndex)
		}
	}
	slices.Sort(used)
	for k, h := range used {
		index[h] = k
	}
	q := *p
	q.Placement = slices.Clone(p.Placement)
	for i := range q.Placement {
		q.Placement[i].HostIndex = index[q.Placement[i].HostIndex]
	}
	return c.Keep(used), &q
}
