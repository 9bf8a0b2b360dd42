package search

import (
	"os"
	"slices"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// sailorScenario is bench/sailor's cluster and model: Sailor's
// heterogeneous scenario.
func sailorScenario(t *testing.T) (*cluster.Cluster, model.Model) {
	t.Helper()
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
	return resolveFile(t, cdata), m
}

// TestSearchDeepSpeedUnevenSplit: DeepSpeed plans get the same layer
// rebalancing as Megatron's. On Sailor's heterogeneous scenario (32
// A100-40GB + 96 V100-16GB, OPT-350M, global batch 1024; bench/sailor) an
// even 6/6/6/6 split leaves the A100 stage idle most of the iteration; the
// best plan must give the A100 stage more layers than any V100 stage.
func TestSearchDeepSpeedUnevenSplit(t *testing.T) {
	c, m := sailorScenario(t)
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

// TestSailorScenarioPlans pins the plans bench/sailor scored with Sailor's
// own simulator (bench/sailor/README.md): planned in fp32, as the scenario
// trains, TP1 PP4 DP32 at micro-batch 1 with layers 4/4/4/12, the A100s
// holding the last stage (5.261 s/iteration against Sailor's plan's
// 5.884 s); planned in fp16 (V100 has no bf16), 5/5/5/9 (5.644 s,
// scored as bf16: the same plan). Sailor's simulator needs
// Sailor's source and is not run in CI: when this fails, the plan changed
// and its score is unknown. Rerun bench/sailor/run.sh, then update the
// README's table and this test.
func TestSailorScenarioPlans(t *testing.T) {
	c, m := sailorScenario(t)
	for _, tc := range []struct {
		precision gpu.Precision
		tp, pp    int
		layers    []int
	}{
		{gpu.PrecisionFP32, 1, 4, []int{4, 4, 4, 12}},
		{gpu.PrecisionFP16, 1, 4, []int{5, 5, 5, 9}},
	} {
		res, err := Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 1024, Seed: 1, TopK: 1,
			Fixed: parallel.Constraints{ZeroStage: -1, Precision: tc.precision}})
		if err != nil {
			t.Fatal(err)
		}
		p := res.Plans[0]
		if p.TP != tc.tp || p.PP != tc.pp || p.MicroBatch != 1 || !slices.Equal(p.StageLayers, tc.layers) {
			t.Errorf("%s: plan 1 is TP%d PP%d DP%d micro-batch %d layers %v, want TP%d PP%d micro-batch 1 layers %v, the plan Sailor's simulator scored: rerun bench/sailor/run.sh and update its README and this test",
				tc.precision, p.TP, p.PP, p.DP, p.MicroBatch, p.StageLayers, tc.tp, tc.pp, tc.layers)
			continue
		}
		last := c.Hosts[p.Placement[(p.PP-1)*p.TP*p.DP].HostIndex]
		if last.GPU.MemoryGiB < 20 {
			t.Errorf("%s: the last stage (%d layers) is on %s, want the A100s", tc.precision, tc.layers[p.PP-1], last.GPU.Model)
		}
	}
}
