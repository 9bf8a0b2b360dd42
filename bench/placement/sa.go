// Command placement compares pipette-launch's placement with a Pipette-style
// simulated-annealing baseline on a random heterogeneous 64-host cluster:
// both optimise the same objective (the planner's predicted iteration time
// of a host order), and the program reports each one's cost and time.
//
//	go run ./bench/placement -sa-budget 30s
package main

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/search"
)

// annealResult is the baseline's best order, its cost and how many
// evaluations it spent.
type annealResult struct {
	order []int
	cost  float64
	evals int
	took  time.Duration
}

// anneal is Pipette's placement search: start from the given host order,
// propose swaps of two hosts, accept worse orders with probability
// exp(-delta/T), cool T geometrically from a start that accepts ~1/2 of
// typical worsening moves, and stop at the time budget.
func anneal(p *search.PlacementProblem, start []int, budget time.Duration, seed uint64) annealResult {
	rng := rand.New(rand.NewPCG(seed, 11))
	n := p.Hosts()
	cur := append([]int(nil), start...)
	curCost := p.Cost(cur)
	best := annealResult{order: append([]int(nil), cur...), cost: curCost}
	// Temperature from the mean worsening of 100 random swaps.
	sum, k := 0.0, 0
	for i := 0; i < 100; i++ {
		a, b := rng.IntN(n), rng.IntN(n)
		cur[a], cur[b] = cur[b], cur[a]
		if d := p.Cost(cur) - curCost; d > 0 {
			sum += d
			k++
		}
		cur[a], cur[b] = cur[b], cur[a]
		best.evals++
	}
	t0 := curCost * 0.01
	if k > 0 {
		t0 = sum / float64(k) / math.Ln2
	}
	temp := t0
	started := time.Now()
	for it := 0; ; it++ {
		if it%256 == 0 {
			el := time.Since(started)
			if el >= budget {
				break
			}
			// Geometric cooling over the budget: T falls to 1e-4 of T0.
			temp = t0 * math.Pow(1e-4, float64(el)/float64(budget))
		}
		a, b := rng.IntN(n), rng.IntN(n)
		if a == b {
			continue
		}
		cur[a], cur[b] = cur[b], cur[a]
		c := p.Cost(cur)
		best.evals++
		if d := c - curCost; d <= 0 || rng.Float64() < math.Exp(-d/temp) {
			curCost = c
			if c < best.cost {
				best.cost = c
				copy(best.order, cur)
			}
		} else {
			cur[a], cur[b] = cur[b], cur[a]
		}
	}
	best.took = time.Since(started)
	return best
}
