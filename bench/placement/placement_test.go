package main

import (
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// The baseline is a real optimiser of the same objective: it returns a
// permutation whose cost is what it reports and never worse than its start.
func TestAnnealReportsItsOrder(t *testing.T) {
	c := randomCluster(16, 1)
	p, err := search.NewPlacementProblem(c, gpt3, benchConfig(16), parallel.FrameworkMegatron)
	if err != nil {
		t.Fatal(err)
	}
	start := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	r := anneal(p, start, 50*time.Millisecond, 1)
	if got := p.Cost(r.order); got != r.cost {
		t.Fatalf("SA reports %g, its order costs %g", r.cost, got)
	}
	if r.cost > p.Cost(start) {
		t.Fatalf("SA result %g worse than its start %g", r.cost, p.Cost(start))
	}
	seen := map[int]bool{}
	for _, h := range r.order {
		seen[h] = true
	}
	if len(seen) != 16 {
		t.Fatalf("SA order %v is not a permutation", r.order)
	}
}

// BenchmarkPlacement64Hosts times pipette-launch's placement on the 64-host
// matrix and reports its cost next to a 2 s simulated annealing run.
func BenchmarkPlacement64Hosts(b *testing.B) {
	c := randomCluster(64, 42)
	p, err := search.NewPlacementProblem(c, gpt3, benchConfig(64), parallel.FrameworkMegatron)
	if err != nil {
		b.Fatal(err)
	}
	var ours float64
	for i := 0; i < b.N; i++ {
		_, ours = p.Place(search.PlaceOptions{Seed: 42})
	}
	b.StopTimer()
	file := make([]int, 64)
	for i := range file {
		file[i] = i
	}
	sa := anneal(p, file, 2*time.Second, 42)
	b.ReportMetric(ours, "cost-s")
	b.ReportMetric(sa.cost, "sa2s-cost-s")
	b.ReportMetric(sa.cost/ours, "sa/ours")
}
