package search

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Placement chooses the host of every TP block. Like Pipette it searches
// over host orders: hosts are listed in an order and blocks (global ranks in
// Megatron order, TP at a time) fill their GPUs in that order, so TP groups
// never leave a host, a stage's DP replicas sit on consecutive hosts and
// stage boundaries fall between host runs. Unlike Pipette's simulated
// annealing it is exact on small clusters (branch and bound over orders with
// host symmetry removed, bounded by the monotone cost of a partial order) and
// on large ones builds island-aware and bandwidth-greedy orders and improves
// them by swap and 2-opt local search under an evaluation and time budget.

// exactPlacementHosts is the largest host count placed by branch and bound.
const exactPlacementHosts = 10

// On clusters of more than longReversalHosts hosts a reversal spans at
// most maxReversalSpan positions: a reversal of a random segment there changes
// the host of a third of all blocks (a full re-price, not an incremental
// one) and, with islands of interchangeable hosts, mostly reorders hosts
// that are alike. Swaps are unaffected; up to longReversalHosts hosts the
// search is what it always was. At 512 (it was the limit) the full
// re-prices made half of plan's time on three islands of 512 hosts, more
// than on 2,048 (issue 23); TestPlansAsGoodAsBefore finds the same plans.
const (
	longReversalHosts = 256
	maxReversalSpan   = 16
)

// exactNodeLimit bounds branch and bound work; beyond it the best order so
// far is kept (it started from the heuristic's, so it is never worse).
const exactNodeLimit = 400000

type placer struct {
	e       *planEval
	starts  [][]int // construction orders local search starts from
	slots   []int   // TP blocks each host holds
	sym     []int   // symmetry class per host (interchangeable hosts)
	scratch evalScratch
	buf     []int
	evals   int
	// noStageMoves turns off stageExact (tests compare with it).
	noStageMoves bool
}

func newPlacer(e *planEval, sym []int, starts [][]int) *placer {
	pl := &placer{e: e, sym: sym, starts: starts, slots: make([]int, len(e.c.Hosts)), buf: make([]int, e.nBlocks)}
	for h, host := range e.c.Hosts {
		pl.slots[h] = host.GPUs / e.cfg.TP
	}
	return pl
}

// blocks fills out[u] with the host of block u under order (a prefix of
// hosts); blocks past the prefix are -1.
func (pl *placer) blocks(order []int, out []int) {
	u := 0
	for _, h := range order {
		for k := 0; k < pl.slots[h] && u < len(out); k++ {
			out[u] = h
			u++
		}
	}
	for ; u < len(out); u++ {
		out[u] = -1
	}
}

func (pl *placer) cost(order []int) float64 {
	pl.blocks(order, pl.buf)
	pl.evals++
	return pl.e.cost(pl.buf, &pl.scratch)
}

// PlaceOptions bound the placement search.
type PlaceOptions struct {
	Seed   int64
	Budget time.Duration // 0 = no time limit (evaluation caps still apply)
	// MaxEvals caps local-search evaluations (0 = 4 per host squared,
	// between 2000 and 20000).
	MaxEvals int
	// short marks the search's short placements (a shape placed before, or
	// a rebalanced split placed again from its even split's order): they
	// start from an order whose stages were already reordered, so they
	// skip stageExact, the costliest part of a placement (issue 23).
	short bool
}

// placeOrder returns the best host order found and its cost.
func (pl *placer) placeOrder(o PlaceOptions) ([]int, float64) {
	deadline := time.Time{}
	if o.Budget > 0 {
		deadline = time.Now().Add(o.Budget)
	}
	order, best := pl.heuristic(o, deadline)
	if len(order) <= exactPlacementHosts {
		order, best = pl.exact(order, best, deadline)
	}
	return order, best
}

// exact runs branch and bound over host orders: each level fixes the next
// host (one representative per symmetry class), and a prefix whose
// optimistic cost is not below the incumbent is cut.
func (pl *placer) exact(incumbent []int, best float64, deadline time.Time) ([]int, float64) {
	n := len(incumbent)
	bestOrder := append([]int(nil), incumbent...)
	order := make([]int, 0, n)
	used := make([]bool, n)
	nodes := 0
	stopped := false
	var rec func()
	rec = func() {
		if stopped {
			return
		}
		nodes++
		if nodes > exactNodeLimit || (!deadline.IsZero() && nodes%256 == 0 && time.Now().After(deadline)) {
			stopped = true
			return
		}
		seen := map[int]bool{}
		for h := 0; h < n; h++ {
			if used[h] || seen[pl.sym[h]] {
				continue
			}
			seen[pl.sym[h]] = true
			order = append(order, h)
			used[h] = true
			if c := pl.cost(order); c < best*(1-1e-12) {
				if len(order) == n {
					best = c
					copy(bestOrder, order)
				} else {
					rec()
				}
			}
			used[h] = false
			order = order[:len(order)-1]
		}
	}
	rec()
	return bestOrder, best
}

// startOrders are the constructions local search starts from: the file
// order, islands kept together (fastest GPUs first), and a chain that always
// continues over the fastest link from the last host.
func startOrders(c *cluster.Cluster) [][]int { return startOrdersSym(c, cluster.HostSymmetry(c)) }

func startOrdersSym(c *cluster.Cluster, sym []int) [][]int {
	n := len(c.Hosts)
	file := make([]int, n)
	for i := range file {
		file[i] = i
	}
	islands := append([]int(nil), file...)
	speed := func(h int) float64 { return -gpu.PeakFLOPS(c.Hosts[h].GPU) }
	slices.SortStableFunc(islands, func(a, b int) int {
		ia, ib := c.Hosts[a].Island, c.Hosts[b].Island
		if ia != ib {
			if sa, sb := speed(a), speed(b); sa != sb {
				return cmp.Compare(sa, sb)
			}
			return cmp.Compare(ia, ib)
		}
		return cmp.Compare(a, b)
	})
	return distinctOrders(sym, islands, fastestChain(c, islands, sym), file)
}

// distinctOrders drops orders whose hosts have, position by position, the
// same symmetry classes as an earlier one's: they cost the same, and every
// placed or scored config prices each start order in full (on the
// generated three-island clusters the file order is the islands order).
func distinctOrders(sym []int, orders ...[]int) [][]int {
	out := orders[:0]
	for _, o := range orders {
		if !slices.ContainsFunc(out, func(p []int) bool {
			return slices.EqualFunc(p, o, func(a, b int) bool { return sym[a] == sym[b] })
		}) {
			out = append(out, o)
		}
	}
	return out
}

// fastestChain starts at order[0] and always continues over the fastest
// link from the last host, ties to the earliest in order. Interchangeable
// hosts (one symmetry class) have equal links from any other host, so
// only each class's earliest unused host is a candidate: O(n * classes).
func fastestChain(c *cluster.Cluster, order, sym []int) []int {
	n := len(order)
	classes := 0
	for _, k := range sym {
		classes = max(classes, k+1)
	}
	queue := make([][]int, classes) // each class's hosts in order
	pos := make([]int, n)
	for i, h := range order {
		queue[sym[h]] = append(queue[sym[h]], h)
		pos[h] = i
	}
	head := make([]int, classes)
	take := func(k int) int {
		h := queue[k][head[k]]
		head[k]++
		return h
	}
	chain := make([]int, 0, n)
	chain = append(chain, take(sym[order[0]]))
	for len(chain) < n {
		last, next := chain[len(chain)-1], -1
		for k := range queue {
			if head[k] == len(queue[k]) {
				continue
			}
			h := queue[k][head[k]]
			if next < 0 {
				next = h
				continue
			}
			lh, ln := c.LinkBetween(last, h).BytesPerS, c.LinkBetween(last, next).BytesPerS
			if lh > ln || (lh == ln && pos[h] < pos[next]) {
				next = h
			}
		}
		chain = append(chain, take(sym[next]))
	}
	return chain
}

// heuristic builds the start orders and improves the best of them with
// first-improvement local search over swaps and segment reversals.
func (pl *placer) heuristic(o PlaceOptions, deadline time.Time) ([]int, float64) {
	n := len(pl.e.c.Hosts)
	var order []int
	best := math.Inf(1)
	for _, s := range pl.starts {
		if c := pl.cost(s); c < best {
			best, order = c, slices.Clone(s) // local search writes into order
		}
	}
	if n < 2 || allSame(pl.sym) {
		return order, best
	}
	maxEvals := o.MaxEvals
	if maxEvals <= 0 {
		maxEvals = min(20000, max(2000, 4*n*n))
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x9e3779b97f4a7c15))
	inc := newIncEval(pl.e, pl.slots, order)
	cand := make([]int, n)
	stale := 0
	for it := 0; it < maxEvals && stale < 2*n*n; it++ {
		if !deadline.IsZero() && it%64 == 0 && time.Now().After(deadline) {
			break
		}
		i, j := rng.IntN(n), rng.IntN(n)
		if i == j || pl.sym[order[i]] == pl.sym[order[j]] {
			stale++
			continue
		}
		if i > j {
			i, j = j, i
		}
		swap := rng.IntN(2) == 0
		if !swap && n > longReversalHosts && j > i+maxReversalSpan {
			j = i + maxReversalSpan
		}
		if inc != nil { // move in place, re-price what it touched, undo if worse
			applyMove(order, i, j, swap)
			pl.evals++
			// Below bound moved's figure is the cost; at or above it the
			// move is undone whatever the exact figure.
			bound := best * (1 - 1e-12)
			if c := inc.moved(order, i, j, bound); c < bound {
				best = c
				stale = 0
			} else {
				applyMove(order, i, j, swap)
				inc.revert(order)
				stale++
			}
			continue
		}
		copy(cand, order)
		applyMove(cand, i, j, swap)
		if c := pl.cost(cand); c < best*(1-1e-12) {
			best = c
			order, cand = cand, order
			stale = 0
		} else {
			stale++
		}
	}
	if inc != nil { // report the full evaluation's figure for the order
		best = pl.cost(order)
	}
	if o.short {
		return order, best
	}
	return pl.stageExact(order, best, deadline)
}

// stageNodeLimit bounds stageExact's branch and bound (a prefix priced is
// a node); at PP 8 a full enumeration would be 8! = 40,320 orders.
const stageNodeLimit = 20000

// stageWorkLimit bounds stageExact's work on large plans: a node prices
// the whole order, O(blocks), so the branch and bound gets
// stageWorkLimit/blocks nodes (the full stageNodeLimit up to 52 blocks,
// 1,024 at 1,024 blocks, never under 4 per stage). Without it 20,000 full
// evaluations per placed config took longer than the rest of the search
// (three islands of 2,048 hosts: over 2 s a config, issue 23).
const stageWorkLimit = 1 << 18

// stageExact reorders whole pipeline stages (stage rows: the hosts of one
// stage) by branch and bound: stages are appended one at a time and a
// prefix whose optimistic cost (blocks not yet placed cost nothing) is not
// below the best order is cut. The local search's swaps and reversals move
// hosts, and moving a stage host by host passes through orders whose DP
// rings straddle both places, so it misses better stage orders (issue 12:
// 0.4% on 16 hosts); within the node limit this finds the best order of
// the stages' host sets.
func (pl *placer) stageExact(order []int, best float64, deadline time.Time) ([]int, float64) {
	k := pl.stageRowHosts()
	if k == 0 || pl.noStageMoves {
		return order, best
	}
	p := pl.e.p
	rows := make([][]int, p)
	for r := range rows {
		rows[r] = slices.Clone(order[r*k : (r+1)*k])
	}
	sig := pl.rowSignatures(rows)
	limit := min(stageNodeLimit, max(4*p, stageWorkLimit/pl.e.nBlocks))
	bestOrder := slices.Clone(order)
	prefix := make([]int, 0, len(order))
	used := make([]bool, p)
	seen := make([]bool, p*p) // seen[depth*p+s]: signature s tried at depth
	nodes := 0
	var rec func()
	rec = func() {
		depth := len(prefix) / k
		tried := seen[depth*p : (depth+1)*p]
		clear(tried)
		for r := 0; r < p; r++ {
			if used[r] || tried[sig[r]] || nodes >= limit {
				continue
			}
			tried[sig[r]] = true
			nodes++
			if !deadline.IsZero() && nodes%256 == 0 && time.Now().After(deadline) {
				nodes = limit
				return
			}
			prefix = append(prefix, rows[r]...)
			used[r] = true
			if c := pl.cost(prefix); c < best*(1-1e-12) {
				if len(prefix) == len(order) {
					best = c
					copy(bestOrder, prefix)
				} else {
					rec()
				}
			}
			used[r] = false
			prefix = prefix[:len(prefix)-k]
		}
	}
	rec()
	return bestOrder, best
}

// rowSignatures numbers the stage rows so that rows with the same
// sequence of host symmetry classes share a number. Exchanging two such
// rows exchanges interchangeable hosts pairwise, which changes no cost, so
// stageExact tries one row of each number per position: on islands of
// alike hosts that cuts p! orders to the multinomial of the row kinds.
func (pl *placer) rowSignatures(rows [][]int) []int {
	sig := make([]int, len(rows))
	for i := range rows {
		sig[i] = i
		for j := 0; j < i; j++ {
			if slices.EqualFunc(rows[i], rows[j], func(a, b int) bool { return pl.sym[a] == pl.sym[b] }) {
				sig[i] = sig[j]
				break
			}
		}
	}
	return sig
}

// stageRowHosts is how many consecutive hosts of an order hold exactly one
// pipeline stage (all DP and CP replicas of it: a stage row), or 0 when
// stages do not fill whole hosts alike (hosts of different sizes, or
// several stages per host, where swapping hosts already moves whole
// stages).
func (pl *placer) stageRowHosts() int {
	s := pl.slots[0]
	for _, x := range pl.slots {
		if x != s {
			return 0
		}
	}
	per := pl.e.dp * pl.e.cp // blocks of one stage
	if s == 0 || per%s != 0 || per/s < 2 || pl.e.p < 2 {
		return 0
	}
	return per / s
}

// applyMove swaps positions i and j, or reverses order[i..j]; both are
// their own inverse.
func applyMove(order []int, i, j int, swap bool) {
	if swap {
		order[i], order[j] = order[j], order[i]
		return
	}
	for a, b := i, j; a < b; a, b = a+1, b-1 {
		order[a], order[b] = order[b], order[a]
	}
}

func allSame(x []int) bool {
	for _, v := range x {
		if v != x[0] {
			return false
		}
	}
	return true
}

// rankPlacement lists every global rank's host, local rank and GPU for a
// host order: block u's TP ranks take consecutive GPUs on its host.
func (pl *placer) rankPlacement(order []int) []RankPlacement {
	c := pl.e.c
	tp := pl.e.cfg.TP
	out := make([]RankPlacement, 0, pl.e.nBlocks*tp)
	u := 0
	for _, h := range order {
		for k := 0; k < pl.slots[h] && u < pl.e.nBlocks; k++ {
			for t := 0; t < tp; t++ {
				local := k*tp + t
				out = append(out, RankPlacement{Rank: u*tp + t, Host: c.Hosts[h].Name, HostIndex: h, LocalRank: local, GPU: local})
			}
			u++
		}
	}
	return out
}

// PlacementProblem is one config's placement objective on a cluster,
// exported so that baselines (bench/placement's simulated annealing) can
// optimise exactly the same cost.
type PlacementProblem struct {
	pl *placer
}

// NewPlacementProblem checks cfg against the framework and returns its
// placement objective over host orders.
func NewPlacementProblem(c *cluster.Cluster, m model.Model, cfg parallel.Config, f parallel.Framework) (*PlacementProblem, error) {
	if cfg.NumMicroBatches == 0 && cfg.MicroBatch > 0 && cfg.DP > 0 {
		cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
	}
	if err := validate(m, cfg, f, c.TotalGPUs()); err != nil {
		return nil, fmt.Errorf("placement problem: %w", err)
	}
	m = attentionOn(c, m)
	for _, h := range c.Hosts {
		if h.GPUs%cfg.TP != 0 {
			return nil, fmt.Errorf("placement problem: host %s has %d GPUs, not a multiple of TP %d", h.Name, h.GPUs, cfg.TP)
		}
	}
	e := newPlanEval(c, m, cfg, f)
	sym := cluster.HostSymmetry(c)
	return &PlacementProblem{pl: newPlacer(e, sym, startOrdersSym(c, sym))}, nil
}

// Hosts is the number of hosts an order lists.
func (p *PlacementProblem) Hosts() int { return len(p.pl.slots) }

// Cost is the predicted iteration time (placement objective) of a host
// order: blocks of TP ranks fill the hosts' GPUs in that order.
func (p *PlacementProblem) Cost(order []int) float64 { return p.pl.cost(order) }

// Place runs the planner's placement (exact branch and bound up to
// exactPlacementHosts hosts, construction plus local search beyond).
func (p *PlacementProblem) Place(o PlaceOptions) ([]int, float64) { return p.pl.placeOrder(o) }

// Evaluations counts cost evaluations so far.
func (p *PlacementProblem) Evaluations() int { return p.pl.evals }

// Simulate prices an order as the plan table does: the event-driven
// schedule simulator's critical path (planEval.predict), memory and rank
// placement, where Cost is the search's closed-form objective.
func (p *PlacementProblem) Simulate(order []int) (Plan, error) {
	if err := checkHostOrder(p.pl.e.c, order); err != nil {
		return Plan{}, fmt.Errorf("simulate: %w", err)
	}
	plan, _, _ := finishPlan(p.pl.e, p.pl, order)
	return plan, nil
}

// PriceOrder prices cfg with its ranks in torchrun's order over a host
// order: global rank r on the host that holds GPU r when the hosts' GPUs
// are counted in that order (TP ranks of a block stay on one host). The
// figure is the simulator's (Simulate), as `plan` prints it. `plan --as-is`
// prices the user's layout with it, and tests and benchmarks compare
// placements with it.
func PriceOrder(c *cluster.Cluster, m model.Model, cfg parallel.Config, f parallel.Framework, order []int) (Plan, error) {
	p, err := NewPlacementProblem(c, m, cfg, f)
	if err != nil {
		return Plan{}, err
	}
	return p.Simulate(order)
}
