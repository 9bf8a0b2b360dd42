package search

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

var llama2_13b = model.Model{Name: "llama2-13b", NumLayers: 40, Hidden: 5120, Heads: 40, FFNHidden: 13824, SwiGLU: true, SeqLength: 4096, Vocab: 32000}

func twoIslands() *cluster.Cluster {
	return testCluster([]islandDef{
		{hosts: 2, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200},
		{hosts: 2, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600},
	}, 25)
}

func TestValidateMegatronChecks(t *testing.T) {
	m := gpt3_175b
	ok := parallel.Config{TP: 8, PP: 8, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, NumMicroBatches: 16, Recompute: parallel.RecomputeFull}
	if err := megatron.Validate(m, ok, 128); err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	cases := []struct {
		name string
		mod  func(*parallel.Config, *model.Model)
		want string
	}{
		{"world", func(c *parallel.Config, _ *model.Model) { c.DP = 3 }, "world size"},
		{"heads", func(c *parallel.Config, m *model.Model) { m.Heads = 12; m.Hidden = 12288 }, "not divisible by tensor"},
		{"groups", func(c *parallel.Config, m *model.Model) { m.QueryGroups = 12 }, "query groups"},
		{"layers", func(c *parallel.Config, m *model.Model) { m.NumLayers = 92 }, "num layers"},
		{"batch", func(c *parallel.Config, _ *model.Model) { c.GlobalBatch = 31 }, "global batch"},
		{"vpp-mb", func(c *parallel.Config, _ *model.Model) { c.VPP = 2; c.GlobalBatch = 24; c.NumMicroBatches = 12 }, "interleaved schedule"},
		{"vpp-pp1", func(c *parallel.Config, _ *model.Model) {
			c.VPP = 2
			c.PP = 1
			c.DP = 16
			c.GlobalBatch = 32
			c.NumMicroBatches = 2
		}, "pipeline parallel size > 1"},
		{"cp-seq", func(c *parallel.Config, m *model.Model) { c.CP = 4; c.DP = 1; c.GlobalBatch = 16; m.SeqLength = 2052 }, "2*cp"},
		{"split-sum", func(c *parallel.Config, _ *model.Model) { c.StageLayers = []int{12, 12, 12, 12, 12, 12, 12, 13} }, "sum to"},
		{"split-empty", func(c *parallel.Config, _ *model.Model) { c.StageLayers = []int{0, 12, 12, 12, 12, 12, 12, 24} }, "at least one"},
		{"zero", func(c *parallel.Config, _ *model.Model) { c.ZeroStage = 2 }, "ZeRO"},
		{"offload", func(c *parallel.Config, _ *model.Model) { c.Offload.OptimizerFraction = 1 }, "distributed optimizer"},
		{"maxpos", func(c *parallel.Config, m *model.Model) { m.MaxPositionEmbeddings = 1024 }, "max position"},
	}
	for _, tc := range cases {
		c, mm := ok, m
		tc.mod(&c, &mm)
		err := megatron.Validate(mm, c, 128)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

func checkPlans(t *testing.T, c *cluster.Cluster, m model.Model, o Options, res *Result) {
	t.Helper()
	if len(res.Plans) == 0 {
		t.Fatal("no plans")
	}
	for i, p := range res.Plans {
		world, idle := c.TotalGPUs(), map[string]bool{}
		if p.Idle != nil { // every GPU but those of the idle hosts
			world -= p.Idle.GPUs
			for _, h := range p.Idle.Hosts {
				idle[h] = true
			}
		}
		for _, rp := range p.Placement {
			if idle[rp.Host] || c.Hosts[rp.HostIndex].Name != rp.Host {
				t.Fatalf("plan %d: rank %d on %s (host %d), which it lists idle or names wrongly", i, rp.Rank, rp.Host, rp.HostIndex)
			}
		}
		if err := validate(m, p.Config, o.Framework, world); err != nil {
			t.Errorf("plan %d fails the framework checks: %v", i, err)
		}
		if !p.Memory.Fits() {
			t.Errorf("plan %d over capacity: %+v", i, p.Memory)
		}
		if i > 0 && p.Predicted.IterationSeconds < res.Plans[i-1].Predicted.IterationSeconds {
			t.Errorf("plans not sorted by predicted time")
		}
		if len(p.Placement) != world {
			t.Fatalf("plan %d places %d ranks, want %d", i, len(p.Placement), world)
		}
		used := map[[2]int]bool{}
		for r, rp := range p.Placement {
			if rp.Rank != r || rp.GPU < 0 || rp.GPU >= c.Hosts[rp.HostIndex].GPUs || used[[2]int{rp.HostIndex, rp.GPU}] {
				t.Fatalf("plan %d: bad placement entry %+v", i, rp)
			}
			used[[2]int{rp.HostIndex, rp.GPU}] = true
			// TP groups never leave a host.
			if lead := p.Placement[r-r%p.TP]; lead.HostIndex != rp.HostIndex {
				t.Fatalf("plan %d: TP group of rank %d spans hosts", i, r)
			}
		}
		pr := p.Predicted
		if pr.IterationSeconds <= 0 || pr.TokensPerSecond <= 0 || pr.TFLOPSPerGPU <= 0 || pr.BubbleFraction < 0 || pr.BubbleFraction >= 1 {
			t.Errorf("plan %d: prediction %+v", i, pr)
		}
	}
}

func TestSearchPlansAreValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		m    model.Model
		o    Options
	}{
		{"megatron-2islands", twoIslands(), llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}},
		{"mixed-memory", testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200}, {hosts: 2, gpus: 8, gpu: gpuA10, intraGBs: 32, nicGbit: 100}}, 25),
			llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}},
		{"deepspeed", dgxA100(2), llama2_13b, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 64, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}},
		{"long-seq-cp", dgxA100(2), model.Model{Name: "8k", NumLayers: 32, Hidden: 4096, Heads: 32, QueryGroups: 8, FFNHidden: 14336, SwiGLU: true, SeqLength: 16384, Vocab: 128256},
			Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 32, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Search(tc.c, tc.m, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			checkPlans(t, tc.c, tc.m, tc.o, res)
			if tc.o.Framework == parallel.FrameworkDeepSpeed {
				for _, p := range res.Plans {
					if p.ZeroStage >= 2 && p.PP > 1 {
						t.Fatalf("DeepSpeed plan with ZeRO-%d and PP %d", p.ZeroStage, p.PP)
					}
				}
			}
		})
	}
}

func TestSearchHonoursConstraints(t *testing.T) {
	yes := true
	fx := parallel.Constraints{TP: 4, PP: 2, MicroBatch: 2, Recompute: parallel.RecomputeSelective, ZeroStage: -1, DistributedOptimizer: &yes}
	c := twoIslands()
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Seed: 1, Fixed: fx}
	res, err := Search(c, llama2_13b, o)
	if err != nil {
		t.Fatal(err)
	}
	checkPlans(t, c, llama2_13b, o, res)
	for _, p := range res.Plans {
		if p.TP != 4 || p.PP != 2 || p.MicroBatch != 2 || p.Recompute != parallel.RecomputeSelective || !p.DistributedOptimizer {
			t.Fatalf("plan ignores constraints: %+v", p.Config)
		}
	}
	if _, err := Search(c, llama2_13b, Options{GlobalBatch: 64, Fixed: parallel.Constraints{TP: 3, ZeroStage: -1}}); err == nil {
		t.Fatal("TP 3 with 40 heads accepted")
	}
	var nf *NoFitError
	if _, err := Search(c, llama2_13b, Options{GlobalBatch: 0}); err == nil || errors.As(err, &nf) {
		t.Fatalf("global batch 0: %v", err)
	}
}

func TestSearchDeterministic(t *testing.T) {
	c := randomCluster(12, 8, 4)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 96, Seed: 7, TopK: 3, Fixed: parallel.Constraints{ZeroStage: -1}}
	a, err := Search(c, llama2_13b, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Search(c, llama2_13b, o)
	for i := range a.Plans {
		if a.Plans[i].Predicted != b.Plans[i].Predicted || configKey(a.Plans[i].Config) != configKey(b.Plans[i].Config) {
			t.Fatalf("plan %d differs between runs with one seed", i)
		}
		for r := range a.Plans[i].Placement {
			if a.Plans[i].Placement[r] != b.Plans[i].Placement[r] {
				t.Fatalf("plan %d placement differs at rank %d", i, r)
			}
		}
	}
}

// Heterogeneous islands: the plan routes the pipeline boundary over the slow
// link, balances layers by GPU speed, and beats ignoring the islands.
func TestSearchIslandsBeatNaive(t *testing.T) {
	c := twoIslands()
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, Seed: 1, TopK: 1, Fixed: parallel.Constraints{ZeroStage: -1}}
	res, err := Search(c, llama2_13b, o)
	if err != nil {
		t.Fatal(err)
	}
	o.IgnoreIslands = true
	naive, err := Search(c, llama2_13b, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Plans[0].Predicted.IterationSeconds > naive.Plans[0].Predicted.IterationSeconds {
		t.Fatalf("island-aware %g s slower than naive %g s", res.Plans[0].Predicted.IterationSeconds, naive.Plans[0].Predicted.IterationSeconds)
	}
	for r, rp := range naive.Plans[0].Placement {
		if want := r / 8; rp.HostIndex != want || rp.LocalRank != r%8 {
			t.Fatalf("naive placement of rank %d: %+v, want host %d", r, rp, want)
		}
	}
	t.Logf("island-aware %+v vs naive %+v", res.Plans[0].Config, naive.Plans[0].Config)
}

func TestSearchNoFitSaysByHowMuch(t *testing.T) {
	c := dgxA100(1)
	_, err := Search(c, gpt3_175b, Options{GlobalBatch: 64, Fixed: parallel.Constraints{ZeroStage: -1, NoOffload: true}})
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("175B on 8 GPUs: %v, want a NoFitError", err)
	}
	if nf.BestMissBytes <= 0 || len(nf.Suggestions) == 0 || !strings.Contains(nf.Message, "GiB") {
		t.Fatalf("no-fit error lacks size or advice: %+v", nf)
	}
	if !strings.Contains(nf.Message, "more GPUs") {
		t.Fatalf("no-fit error does not suggest more GPUs: %s", nf.Message)
	}
	if !strings.Contains(nf.Message, "allow CPU offload") {
		t.Fatalf("with --no-offload the advice should offer offload: %s", nf.Message)
	}
}

// When offload was tried and still misses, the advice says so (and on which
// memory) instead of suggesting offload again.
func TestSearchNoFitAfterOffloadSaysHowFar(t *testing.T) {
	c := dgxA100(1)
	for i := range c.Hosts {
		c.Hosts[i].MemoryBytes = 512 * gpu.GiB
	}
	_, err := Search(c, gpt3_175b, Options{GlobalBatch: 64, Fixed: parallel.Constraints{ZeroStage: -1}})
	var nf *NoFitError
	if !errors.As(err, &nf) {
		t.Fatalf("175B on 8 GPUs with 512 GiB host memory: %v, want a NoFitError", err)
	}
	if strings.Contains(nf.Message, "allow CPU offload") || !strings.Contains(nf.Message, "CPU offload was tried") ||
		!strings.Contains(nf.Message, "host memory") {
		t.Fatalf("advice should say offload was tried and misses on host memory: %s", nf.Message)
	}
}

// Property: with the pipeline fixed, more micro-batches (a bigger global
// batch) give a lower bubble fraction.
func TestMoreMicroBatchesLowerBubbleInPlans(t *testing.T) {
	c := dgxA100(2)
	prev := 1.0
	for _, gbs := range []int{8, 16, 32, 64} {
		res, err := Search(c, llama2_13b, Options{GlobalBatch: gbs, TopK: 1, Fixed: parallel.Constraints{TP: 4, PP: 4, VPP: 1, MicroBatch: 1, ZeroStage: -1, Recompute: parallel.RecomputeFull}})
		if err != nil {
			t.Fatal(err)
		}
		b := res.Plans[0].Predicted.BubbleFraction
		if b >= prev {
			t.Fatalf("global batch %d: bubble %g not below %g", gbs, b, prev)
		}
		prev = b
	}
}

// Uneven splits follow GPU speed: a stage on H100s never holds fewer
// layers than one on A100s (Holmes' heterogeneous pipeline stages).
func TestSearchFasterIslandGetsMoreLayers(t *testing.T) {
	c := twoIslands()
	res, err := Search(c, llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, Seed: 1, TopK: 5, Fixed: parallel.Constraints{ZeroStage: -1}})
	if err != nil {
		t.Fatal(err)
	}
	uneven := false
	for _, p := range res.Plans {
		minFast, maxSlow := 1<<30, 0
		for r := 0; r < p.PP; r++ {
			host := c.Hosts[p.Placement[r*p.TP*p.CP*p.DP].HostIndex]
			n := p.StageLayers[r] // chunk 0 of rank r; all chunks of a rank are equal
			if host.GPU == gpuH100 {
				minFast = min(minFast, n)
			} else {
				maxSlow = max(maxSlow, n)
			}
		}
		if maxSlow > 0 && minFast < 1<<30 {
			uneven = true
			if minFast < maxSlow {
				t.Errorf("plan %+v: an H100 stage has %d layers, an A100 stage %d", p.Config, minFast, maxSlow)
			}
		}
	}
	if !uneven {
		t.Fatal("no top plan spans both islands; the test needs one")
	}
}

// Property: doubling every inter-host link never makes the best plan
// slower (placement is exact on these 6 hosts).
func TestSearchFasterLinksNeverSlower(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		slow := randomCluster(6, 8, seed)
		fast := randomCluster(6, 8, seed)
		fastBW, _ := fast.Matrices()
		for a := range fastBW {
			for b := range fastBW[a] {
				fastBW[a][b] *= 2
			}
		}
		o := Options{GlobalBatch: 96, Seed: 1, TopK: 1, Fixed: parallel.Constraints{ZeroStage: -1}}
		rs, err := Search(slow, llama2_13b, o)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := Search(fast, llama2_13b, o)
		if err != nil {
			t.Fatal(err)
		}
		if s, f := rs.Plans[0].Predicted.IterationSeconds, rf.Plans[0].Predicted.IterationSeconds; f > s*(1+1e-9) {
			t.Fatalf("seed %d: best plan %g s with faster links, %g s before", seed, f, s)
		}
	}
}

// Hosts with different GPU counts and DRAM are each judged by their own
// ranks and memory: a big host with 8 GPUs and 2 TiB beside 1-GPU hosts
// with 16 GiB fits (the reviewer's case, once rejected as 8 x 3 GiB against
// 16 GiB), and a host that really is short is named as a host-memory miss.
func TestSearchHostMemoryPerHost(t *testing.T) {
	m, _ := model.Preset("gpt3-1.3b")
	build := func(smallHostGiB float64) *cluster.Cluster {
		c := dgxA100(3)
		c.Hosts[0].MemoryBytes = 2048 * gpu.GiB
		for _, i := range []int{1, 2} {
			c.Hosts[i].GPUs = 1
			c.Hosts[i].MemoryBytes = smallHostGiB * gpu.GiB
		}
		return c
	}
	res, err := Search(build(16), m, Options{GlobalBatch: 40, Fixed: parallel.Constraints{ZeroStage: -1}})
	if err != nil {
		t.Fatalf("8-GPU 2 TiB host + two 1-GPU 16 GiB hosts: %v", err)
	}
	for _, p := range res.Plans {
		if !p.Memory.Fits() {
			t.Errorf("plan over capacity: %+v", p.Memory)
		}
	}
	_, err = Search(build(2), m, Options{GlobalBatch: 40, Fixed: parallel.Constraints{ZeroStage: -1}})
	var nf *NoFitError
	if !errors.As(err, &nf) || !strings.Contains(nf.Message, "host memory") {
		t.Errorf("1-GPU hosts with 2 GiB: %v, want a host-memory miss", err)
	}
}

// A user's own layer split (--decoder-first/last-pipeline-num-layers,
// --pipeline-model-parallel-layout) is a constraint: every plan keeps it,
// even where rebalancing for the faster island would move layers.
func TestSearchKeepsTheUsersLayerSplit(t *testing.T) {
	c := twoIslands()
	split := []int{4, 12, 12, 12}
	res, err := Search(c, llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, Seed: 1, TopK: 5,
		Fixed: parallel.Constraints{ZeroStage: -1, PP: 4, StageLayers: split}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Plans {
		if !slices.Equal(p.StageLayers, split) || p.PP != 4 || max(p.VPP, 1) != 1 {
			t.Errorf("plan PP %d VPP %d stages %v, want the user's %v", p.PP, p.VPP, p.StageLayers, split)
		}
	}
	// A split that cannot be PP*VPP stages leaves nothing valid.
	if _, err := Search(c, llama2_13b, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, Seed: 1,
		Fixed: parallel.Constraints{ZeroStage: -1, PP: 2, VPP: 1, StageLayers: split}}); err == nil {
		t.Error("PP 2 VPP 1 with a 4-stage split: want an error")
	}
}
