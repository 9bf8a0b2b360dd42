package search

import (
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// TestSearchDeepSpeedUnevenSplit: DeepSpeed plans get the same layer
// rebalancing as Megatron's. On Sailor's heterogeneous scenario (32
// A100-40GB + 96 V100-16GB, OPT-350M, global batch 1024; bench/sailor) an
// even 6/6/6/6 split leaves the A100 stage idle most of the iteration; the
// best plan must give the A100 stage more layers than any V100 stage.
func TestSearchDeepSpeedUnevenSplit(t *testing.T) {
	cdata, err := os.ReadFile("../../bench/sailor/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mdata, err := os.ReadFile("../../bench/sailor/opt-350m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Parse(mdata)
	if err != nil {
		t.Fatal(err)
	}
	c := resolveFile(t, cdata)
	res, err := Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 1024, Seed: 1, TopK: 3,
		Fixed: parallel.Constraints{ZeroStage: -1}})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	if p.PP < 2 {
		t.Fatalf("best plan %+v has no pipeline; the test needs one", p.Config)
	}
	minFast, maxSlow := 1<<30, 0
	for r := 0; r < p.PP; r++ {
		n := p.StageLayers[r]
		for d := 0; d < p.DP*p.TP; d++ {
			host := c.Hosts[p.Placement[r*p.TP*p.DP+d].HostIndex]
			if host.GPU.MemoryGiB > 20 { // the A100-40GB island
				minFast = min(minFast, n)
			} else {
				maxSlow = max(maxSlow, n)
			}
		}
	}
	if minFast == 1<<30 || maxSlow == 0 {
		t.Fatalf("plan %+v stages %v: no stage wholly on either GPU kind", p.Config, p.StageLayers)
	}
	if minFast <= maxSlow {
		t.Errorf("DeepSpeed plan %+v splits %v: an A100 stage holds %d layers, a V100 stage %d; want the A100 stages to hold more",
			p.Config, p.StageLayers, minFast, maxSlow)
	}
}
