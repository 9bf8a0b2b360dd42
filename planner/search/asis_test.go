package search

import (
	"math"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The as-is search (IgnoreIslands with a HostOrder) places ranks in
// torchrun's order on that order, its figure is PriceOrder's (the
// simulator) on the same order, and on two islands listed interleaved it is
// slower than the planned placement.
func TestHostOrderIsPricedAsGiven(t *testing.T) {
	c := testCluster([]islandDef{
		{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
		{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
	}, 10)
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	order := []int{0, 4, 1, 5, 2, 6, 3, 7} // islands interleaved
	fixed := parallel.Constraints{TP: 8, PP: 2, ZeroStage: -1}
	so := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Fixed: fixed, TopK: 1, Seed: 1, IgnoreIslands: true, HostOrder: order}
	res, err := Search(c, m, so)
	if err != nil {
		t.Fatal(err)
	}
	asIs := res.Plans[0]
	for _, rp := range asIs.Placement {
		if rp.HostIndex != order[rp.Rank/8] {
			t.Fatalf("rank %d on host %d, torchrun's order puts it on %d", rp.Rank, rp.HostIndex, order[rp.Rank/8])
		}
	}
	sim, err := PriceOrder(c, m, asIs.Config, parallel.FrameworkMegatron, order)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := asIs.Predicted.IterationSeconds, sim.Predicted.IterationSeconds; got != want {
		t.Fatalf("as-is row %v s, simulator on the order %v s", got, want)
	}
	so.IgnoreIslands, so.HostOrder = false, nil
	planned, err := Search(c, m, so)
	if err != nil {
		t.Fatal(err)
	}
	ratio := asIs.Predicted.IterationSeconds / planned.Plans[0].Predicted.IterationSeconds
	// Interleaved, stage 0 is hosts 0,4,1,5: each DP ring of 4 crosses the
	// 10 Gbit/s link twice; the planner keeps every ring in an island.
	if ratio <= 1.2 {
		t.Fatalf("as-is / planned = %.3f, want a clear loss for DP rings across the slow link", ratio)
	}
	// PriceOrder of the planned config on the planned order is the plan's own figure.
	// A plan that leaves hosts idle is priced on the hosts it uses.
	used, p := OnUsedHosts(c, &planned.Plans[0])
	var pOrder []int
	for _, rp := range p.Placement {
		if rp.LocalRank == 0 {
			pOrder = append(pOrder, rp.HostIndex)
		}
	}
	again, err := PriceOrder(used, m, p.Config, parallel.FrameworkMegatron, pOrder)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(again.Predicted.IterationSeconds-p.Predicted.IterationSeconds) > 1e-12 {
		t.Fatalf("planned %v s, PriceOrder on its order %v s", p.Predicted.IterationSeconds, again.Predicted.IterationSeconds)
	}
	for _, bad := range [][]int{{0, 1, 2}, {0, 0, 1, 2, 3, 4, 5, 6}} {
		so.IgnoreIslands, so.HostOrder = true, bad
		if _, err := Search(c, m, so); err == nil || !strings.Contains(err.Error(), "host order") {
			t.Fatalf("order %v: %v, want a host-order error", bad, err)
		}
		if _, err := PriceOrder(c, m, p.Config, parallel.FrameworkMegatron, bad); err == nil {
			t.Fatalf("PriceOrder accepted order %v", bad)
		}
	}
}
