package search

import (
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/examples"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// offloadBeatsRecompute is a cluster where offload is predicted faster than
// anything without it: one host of 2 GPUs with 16 GiB each on a slow
// (20 GB/s) bus, and a host that makes the CPU step of a 1.3B model cheap
// (PCIe 100 GB/s, 1 TB/s DRAM, 256 cores). Without offload gpt3-1.3b only
// fits as two pipeline stages with full recompute; with the optimizer on
// the CPU it runs data parallel with selective recompute.
func offloadBeatsRecompute() *cluster.Cluster {
	g := gpu.Spec{Model: "test-16GB", MemoryGiB: 16, PeakTFLOPS: 312, MemoryBandwidthTBPerS: 2}
	c := testCluster([]islandDef{{hosts: 1, gpus: 2, gpu: g, intraGBs: 20, nicGbit: 100}}, 0)
	h := &c.Hosts[0]
	h.PCIeBytesPerS, h.HostMemBytesPerS, h.CPUCores = 100e9, 1000e9, 256
	return c
}

func resolveFile(t *testing.T, data []byte) *cluster.Cluster {
	t.Helper()
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("parse cluster: %v", err)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	return c
}

// TestSearchOffloadComparison: the search keeps the best plan with and the
// best without offload, so the table can say why plan 1 does (not) offload.
func TestSearchOffloadComparison(t *testing.T) {
	small, err := os.ReadFile("../../examples/small-offload.yaml")
	if err != nil {
		t.Fatal(err)
	}
	smallCluster := resolveFile(t, small)
	for _, tc := range []struct {
		name      string
		cluster   *cluster.Cluster
		model     string
		fw        parallel.Framework
		gbs       int
		wantFirst bool // plan 1 offloads
		// otherFits: the best plan of the other kind fits memory.
		otherFits bool
	}{
		{"13B on 4x40GB megatron", smallCluster, "gpt3-13b", parallel.FrameworkMegatron, 64, true, false},
		{"13B on 4x40GB deepspeed", smallCluster, "gpt3-13b", parallel.FrameworkDeepSpeed, 64, true, false},
		{"13B on the example cluster", resolveFile(t, examples.DefaultCluster), "gpt3-13b", parallel.FrameworkMegatron, 256, false, true},
		{"offload beats recompute and PP", offloadBeatsRecompute(), "gpt3-1.3b", parallel.FrameworkMegatron, 64, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.Preset(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Search(tc.cluster, m, Options{Framework: tc.fw, GlobalBatch: tc.gbs, TopK: 5, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}})
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(res.Plans); i++ {
				if res.Plans[i].Predicted.IterationSeconds < res.Plans[i-1].Predicted.IterationSeconds {
					t.Errorf("plan %d (%g s) is faster than plan %d: not ranked by predicted time", i+1, res.Plans[i].Predicted.IterationSeconds, i)
				}
			}
			first := res.Plans[0]
			if first.UsesOffload() != tc.wantFirst {
				t.Fatalf("plan 1 offload %+v, want offload=%v", first.Offload, tc.wantFirst)
			}
			if !first.Memory.Fits() || first.Memory.HostCapacityBytes <= 0 || first.Memory.HostBytesPerNode > first.Memory.HostCapacityBytes {
				t.Errorf("plan 1 memory %+v: want GPU and (known) host memory to fit", first.Memory)
			}
			if first.UsesOffload() && first.Predicted.Breakdown.Offload <= 0 {
				t.Errorf("plan 1 offloads but its offload time is %g s", first.Predicted.Breakdown.Offload)
			}
			checkComparison(t, res)
			cmp := res.Comparison
			same, other := cmp.BestWithoutOffload, cmp.BestWithOffload
			if tc.wantFirst {
				same, other = other, same
			}
			if !same.Fits || same.IterationSeconds != first.Predicted.IterationSeconds {
				t.Errorf("best of plan 1's kind %+v is not plan 1 (%g s)", same, first.Predicted.IterationSeconds)
			}
			if other.Fits != tc.otherFits {
				t.Fatalf("other kind fits=%v, want %v (%+v)", other.Fits, tc.otherFits, other)
			}
			if !other.Fits {
				if other.Considered == 0 || other.Miss == nil || other.Miss.Memory != "gpu" {
					t.Fatalf("other kind does not fit but says no GPU miss: %+v", other)
				}
				t.Logf("without offload: TP%d PP%d needs %.1f GiB on stage %d of %.1f GiB",
					other.Miss.Config.TP, other.Miss.Config.PP, other.Miss.NeedBytes/gpu.GiB, other.Miss.Stage, other.Miss.CapacityBytes/gpu.GiB)
				return
			}
			if tc.wantFirst { // offload chosen although a plan without it fits: offload is what lets plan 1 fit
				bare := first.Config
				bare.Offload = parallel.Offload{}
				if _, over := stageMemory(m, bare, tc.fw, func(int) float64 { return first.Memory.GPUCapacityBytes }); over <= 0 {
					t.Errorf("plan 1 fits without its offload too (%.1f GiB to spare) yet offloads", -over/gpu.GiB)
				}
			}
			if other.IterationSeconds <= first.Predicted.IterationSeconds {
				t.Errorf("the other kind is faster (%g s) than plan 1 (%g s)", other.IterationSeconds, first.Predicted.IterationSeconds)
			}
			t.Logf("plan 1 %.3f s (offload %.3f s, TP%d PP%d DP%d %s); other kind %.3f s (offload %.3f s, TP%d PP%d DP%d %s)",
				first.Predicted.IterationSeconds, first.Predicted.Breakdown.Offload, first.TP, first.PP, first.DP, first.Recompute,
				other.IterationSeconds, other.OffloadSeconds, other.Plan.TP, other.Plan.PP, other.Plan.DP, other.Plan.Recompute)
		})
	}
}

// checkComparison holds for every search: each alternative is of its kind,
// fits when it says so, is no faster than plan 1, and when it does not fit
// names a config of its kind whose need exceeds the capacity.
func checkComparison(t *testing.T, res *Result) {
	t.Helper()
	if res.Comparison == nil || res.Comparison.BestWithoutOffload == nil || res.Comparison.BestWithOffload == nil {
		t.Fatalf("comparison %+v: want both kinds", res.Comparison)
	}
	for _, k := range []struct {
		offload bool
		alt     *Alternative
	}{{false, res.Comparison.BestWithoutOffload}, {true, res.Comparison.BestWithOffload}} {
		a := k.alt
		switch {
		case a.Fits:
			p := a.Plan
			if p == nil || p.UsesOffload() != k.offload || !p.Memory.Fits() {
				t.Errorf("offload=%v: best plan %+v is of the wrong kind or does not fit", k.offload, p)
				continue
			}
			if a.IterationSeconds != p.Predicted.IterationSeconds || a.OffloadSeconds != p.Predicted.Breakdown.Offload {
				t.Errorf("offload=%v: figures %g/%g s differ from the plan's", k.offload, a.IterationSeconds, a.OffloadSeconds)
			}
			if k.offload != (a.OffloadSeconds > 0) {
				t.Errorf("offload=%v: offload time %g s", k.offload, a.OffloadSeconds)
			}
			if a.IterationSeconds < res.Plans[0].Predicted.IterationSeconds {
				t.Errorf("offload=%v: %g s beats plan 1 (%g s): ranking is not by predicted time", k.offload, a.IterationSeconds, res.Plans[0].Predicted.IterationSeconds)
			}
		case a.Considered > 0:
			if a.Miss == nil || a.Miss.Config.UsesOffload() != k.offload || a.Miss.MissBytes <= 0 ||
				!approx(a.Miss.NeedBytes-a.Miss.CapacityBytes, a.Miss.MissBytes, 1e-9) {
				t.Errorf("offload=%v: no fit but miss %+v", k.offload, a.Miss)
			}
		}
	}
}

// TestSearchOffloadNotTried: offload is only tried where memory needs it
// (or forced); forbidding it leaves the offload side empty.
func TestSearchOffloadNotTried(t *testing.T) {
	c := resolveFile(t, examples.DefaultCluster)
	m, _ := model.Preset("gpt3-1.3b")
	for _, tc := range []struct {
		name           string
		fixed          parallel.Constraints
		withConsidered bool
	}{
		{"everything fits", parallel.Constraints{ZeroStage: -1, Recompute: parallel.RecomputeFull, MicroBatch: 1}, false},
		{"--no-offload", parallel.Constraints{ZeroStage: -1, NoOffload: true}, false},
		{"--offload", parallel.Constraints{ZeroStage: -1, ForceOffload: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(c, m, Options{GlobalBatch: 256, TopK: 2, Seed: 1, Fixed: tc.fixed})
			if err != nil {
				t.Fatal(err)
			}
			checkComparison(t, res)
			with, without := res.Comparison.BestWithOffload, res.Comparison.BestWithoutOffload
			if (with.Considered > 0) != tc.withConsidered || with.Fits != tc.withConsidered {
				t.Errorf("with offload %+v, want tried and fitting = %v", with, tc.withConsidered)
			}
			if (without.Considered == 0) != tc.fixed.ForceOffload {
				t.Errorf("without offload considered %d with %+v", without.Considered, tc.fixed)
			}
		})
	}
}
