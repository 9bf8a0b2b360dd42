package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Four hosts, two pipelines of two stages, one host per stage (inner DP 1):
// hand-computed objective.
func TestObjectiveByHand(t *testing.T) {
	bw := [][]float64{ // GB/s
		{100, 10, 1, 2},
		{10, 100, 4, 5},
		{1, 4, 100, 20},
		{2, 5, 20, 100},
	}
	p := &problem{bw: bw, pipelines: 2, pp: 2, interDP: 2, innerDP: 1, ppMsgGB: 0.01, dpMsgGB: 1}
	// state [0 1 | 2 3]: pipelines 0->1 and 2->3; stage 0's ring 0 <-> 2.
	// pp: max(2*0.01/10, 2*0.01/20) s = 2 ms; dp: 2*(2-1)*1/1/2 s = 1000 ms.
	if got, want := p.cost([]int{0, 1, 2, 3}), 2.0+1000; math.Abs(got-want) > 1e-9 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	// state [0 2 | 1 3]: pp max(2*0.01/1, 2*0.01/5) s = 20 ms; ring 0 <-> 1 at 10: 100 ms.
	if got, want := p.cost([]int{0, 2, 1, 3}), 20.0+100; math.Abs(got-want) > 1e-9 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	// Megatron's host order: stage 0 of both pipelines first.
	if got := hostOrder([]int{0, 2, 1, 3}, 2, 2); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Fatalf("host order %v", got)
	}
}

// Every move keeps a permutation; the annealer gets within 5% of the
// brute-force optimum of an 8-host instance (it cools to a greedy search
// after ~10k steps at alpha 0.999, as Pipette's does, so it need not
// reach the optimum) and far below a random order.
func TestAnnealFindsOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := rng.Perm(9)
	for range 2000 {
		s = neighbor(rng, s)
		if c := slices.Sorted(slices.Values(s)); !slices.Equal(c, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}) {
			t.Fatalf("move broke the permutation: %v", s)
		}
	}
	n := 8
	bw := make([][]float64, n)
	for i := range bw {
		bw[i] = make([]float64, n)
		for j := range bw[i] {
			bw[i][j] = 1 + 99*rng.Float64()
			if i == j {
				bw[i][j] = 300
			}
		}
	}
	p := &problem{bw: bw, pipelines: 2, pp: 4, interDP: 2, innerDP: 1, ppMsgGB: 0.05, dpMsgGB: 0.2}
	best := math.Inf(1)
	perm := make([]int, n)
	var rec func(k int, used uint)
	rec = func(k int, used uint) {
		if k == n {
			best = min(best, p.cost(perm))
			return
		}
		for h := 0; h < n; h++ {
			if used&(1<<h) == 0 {
				perm[k] = h
				rec(k+1, used|1<<h)
			}
		}
	}
	rec(0, 0)
	res := anneal(p, n, 1, 0.999, 300*time.Millisecond, 0)
	random := p.cost(rng.Perm(n))
	if res.cost > best*1.05 || res.cost >= random {
		t.Fatalf("annealing %v after %d orders, brute force %v, a random order %v", res.cost, res.evals, best, random)
	}
}
