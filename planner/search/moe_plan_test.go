package search

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// h100Cluster64 is 8 DGX H100 hosts (NVSwitch 450 GB/s, 8x400 Gbit/s IB).
func h100Cluster64() *cluster.Cluster {
	return testCluster([]islandDef{{hosts: 8, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200}}, 0)
}

func twoClusters(t *testing.T) *cluster.Cluster {
	t.Helper()
	data, err := os.ReadFile("../../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// epGroupsOf maps every rank of a plan to its EP group: Megatron's expert
// ranks are tp-ep-dp-pp, so a group is EP x ETP consecutive ranks of one
// pipeline stage (stage-local rank / (EP x ETP)).
func epGroupsOf(p Plan) map[int][]RankPlacement {
	ep, etp := p.ExpertParallel()
	stage := p.TP * p.CP * p.DP
	out := map[int][]RankPlacement{}
	for _, r := range p.Placement {
		pp, local := r.Rank/stage, r.Rank%stage
		g := pp*stage + local/(ep*etp)
		out[g] = append(out[g], r)
	}
	return out
}

// checkMoEPlan: the plan fits and every EP group stays inside one host
// (sameHost) or at least one island.
func checkMoEPlan(t *testing.T, c *cluster.Cluster, p Plan, sameHost bool) {
	t.Helper()
	if !p.Memory.Fits() {
		t.Errorf("plan does not fit: %.1f of %.1f GiB", p.Memory.PeakBytesPerGPU/gpu.GiB, p.Memory.GPUCapacityBytes/gpu.GiB)
	}
	if p.EP < 2 {
		t.Errorf("plan has no expert parallelism (EP %d)", p.EP)
	}
	for g, ranks := range epGroupsOf(p) {
		for _, r := range ranks[1:] {
			a, b := ranks[0].HostIndex, r.HostIndex
			if sameHost && a != b {
				t.Errorf("EP group %d spans hosts %s and %s", g, ranks[0].Host, r.Host)
			}
			if c.Hosts[a].Island != c.Hosts[b].Island {
				t.Errorf("EP group %d spans islands (%s, %s)", g, ranks[0].Host, r.Host)
			}
		}
	}
}

// densePlannedAsMoE plans m with its experts ignored, then prices the
// chosen configuration as what actually runs: the MoE model with the same
// sizes and no expert parallelism (the dense plan renders none). It
// returns the dense plan and the MoE estimate of that configuration (or
// the no-fit error).
func densePlannedAsMoE(t *testing.T, c *cluster.Cluster, m model.Model, gbs int) (Plan, *Result, error) {
	t.Helper()
	dense := m
	dense.MoE = model.MoE{}
	dres, err := Search(c, dense, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: gbs, Seed: 1, TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := dres.Plans[0]
	dist := d.DistributedOptimizer
	sp := d.SequenceParallel
	fx := parallel.Constraints{TP: d.TP, PP: d.PP, DP: d.DP, CP: d.CP, VPP: d.VPP, MicroBatch: d.MicroBatch, Recompute: d.Recompute,
		ZeroStage: -1, DistributedOptimizer: &dist, SequenceParallel: &sp, EP: 1, ETP: d.TP, NoOffload: d.Offload == (parallel.Offload{})}
	res, err := Search(c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: gbs, Seed: 1, TopK: 1, Fixed: fx})
	return d, res, err
}

// TestMoEPlanMixtral: Mixtral 8x7B on 64 H100 and on the two-cluster
// example: the plan fits with its EP groups inside a host (64 H100) or an
// island (two clusters); the same model planned as dense (experts ignored)
// under-estimates the memory of what then runs and its time.
func TestMoEPlanMixtral(t *testing.T) {
	m, _ := model.Preset("mixtral-8x7b")
	for _, tc := range []struct {
		name     string
		c        *cluster.Cluster
		sameHost bool
	}{
		{"64xH100", h100Cluster64(), true},
		{"two-clusters", twoClusters(t), false},
	} {
		res, err := Search(tc.c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 256, Seed: 1, TopK: 3})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		p := res.Plans[0]
		t.Logf("%s MoE plan: TP%d PP%d DP%d VPP%d EP%d ETP%d mb%d %s: %.3f s, %.1f/%.1f GiB",
			tc.name, p.TP, p.PP, p.DP, p.VPP, p.EP, p.ETP, p.MicroBatch, p.Recompute,
			p.Predicted.IterationSeconds, p.Memory.PeakBytesPerGPU/gpu.GiB, p.Memory.GPUCapacityBytes/gpu.GiB)
		checkMoEPlan(t, tc.c, p, tc.sameHost)

		d, real, err := densePlannedAsMoE(t, tc.c, m, 256)
		t.Logf("%s dense plan (experts ignored): TP%d PP%d DP%d VPP%d mb%d %s: predicted %.3f s, %.1f GiB",
			tc.name, d.TP, d.PP, d.DP, d.VPP, d.MicroBatch, d.Recompute, d.Predicted.IterationSeconds, d.Memory.PeakBytesPerGPU/gpu.GiB)
		var nf *NoFitError
		switch {
		case errors.As(err, &nf):
			t.Logf("%s: that configuration with the experts does not fit: %s", tc.name, nf.Message)
			if nf.BestMissBytes < 10*gpu.GiB {
				t.Errorf("%s: the dense plan misses by only %.1f GiB with the experts", tc.name, nf.BestMissBytes/gpu.GiB)
			}
		case err != nil:
			t.Fatalf("%s: %v", tc.name, err)
		default:
			r := real.Plans[0]
			t.Logf("%s: that configuration with the experts: %.3f s (dense said %.3f s, %.2fx), %.1f GiB (dense said %.1f GiB)",
				tc.name, r.Predicted.IterationSeconds, d.Predicted.IterationSeconds, r.Predicted.IterationSeconds/d.Predicted.IterationSeconds,
				r.Memory.PeakBytesPerGPU/gpu.GiB, d.Memory.PeakBytesPerGPU/gpu.GiB)
			if r.Predicted.IterationSeconds < 1.5*d.Predicted.IterationSeconds {
				t.Errorf("%s: the dense plan's time is within 1.5x of the MoE estimate of the same configuration", tc.name)
			}
		}
		// The dense plan's own memory and time are far below the MoE plan's
		// (7.2B vs 46.7B parameters; 2 experts per token).
		if d.Predicted.IterationSeconds > 0.7*p.Predicted.IterationSeconds {
			t.Errorf("%s: dense predicts %.3f s against the MoE plan's %.3f s", tc.name, d.Predicted.IterationSeconds, p.Predicted.IterationSeconds)
		}
	}
}

// TestMoESearchRules: every MoE plan obeys Megatron-Core's rules, pinned
// EP/ETP are honoured, and with sequence parallelism off and TP > 1 no
// plan uses EP > 1.
func TestMoESearchRules(t *testing.T) {
	m, _ := model.Preset("mixtral-8x7b")
	c := h100Cluster64()
	off := false
	for _, tc := range []struct {
		name string
		fx   parallel.Constraints
	}{
		{"free", parallel.Constraints{ZeroStage: -1}},
		{"ep4", parallel.Constraints{ZeroStage: -1, EP: 4}},
		{"ep2 etp2", parallel.Constraints{ZeroStage: -1, EP: 2, ETP: 2, TP: 2}},
		{"tp2 sp off", parallel.Constraints{ZeroStage: -1, TP: 2, SequenceParallel: &off}},
	} {
		res, err := Search(c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 256, Seed: 1, TopK: 5, Fixed: tc.fx})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, p := range res.Plans {
			ep, etp := p.ExpertParallel()
			if m.NumExperts%ep != 0 || 64%(etp*ep*p.PP) != 0 || (ep > 1 && p.TP > 1 && !p.SequenceParallel) {
				t.Errorf("%s: plan TP%d PP%d EP%d ETP%d SP%v breaks Megatron's rules", tc.name, p.TP, p.PP, ep, etp, p.SequenceParallel)
			}
			if (tc.fx.EP > 0 && ep != tc.fx.EP) || (tc.fx.ETP > 0 && etp != tc.fx.ETP) {
				t.Errorf("%s: plan EP%d ETP%d ignores the pinned values", tc.name, ep, etp)
			}
			if tc.fx.SequenceParallel != nil && ep != 1 {
				t.Errorf("%s: EP%d with TP%d and no sequence parallelism", tc.name, ep, p.TP)
			}
		}
	}
	for _, bad := range []struct {
		m    string
		ep   int
		want string
	}{{"mixtral-8x7b", 64, "the 8 experts are not divisible by EP 64"}, {"llama3-8b", 2, "has no experts"}} {
		bm, _ := model.Preset(bad.m)
		_, err := Search(c, bm, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 256, Fixed: parallel.Constraints{ZeroStage: -1, EP: bad.ep}})
		var ce *ConstraintError
		if !errors.As(err, &ce) || ce.Flag != "ep" || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s --ep %d: %v, want a --ep error saying %q", bad.m, bad.ep, err, bad.want)
		}
	}
	cfg := parallel.Config{TP: 1, PP: 1, DP: 64, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 1, EP: 16}
	if err := megatron.Validate(m, cfg, 64); err == nil {
		t.Error("EP16 with 8 experts accepted")
	}
	dense, _ := model.Preset("llama3-8b")
	cfg.EP = 2
	if err := megatron.Validate(dense, cfg, 64); err == nil {
		t.Error("EP2 on a dense model accepted")
	}
}

// TestMoEPlacementPairsFastHosts: 4 hosts of 4 H100s where only the pairs
// (0,2) and (1,3) have a fast link (400 Gbit/s; the rest 25 Gbit/s). With
// EP 8 and TP 1 an EP group spans two hosts; the placement must put every
// group on a fast pair, since its all-to-all runs once per MoE layer.
func TestMoEPlacementPairsFastHosts(t *testing.T) {
	m := model.Model{Name: "moe-8l", NumLayers: 8, Hidden: 4096, Heads: 32, QueryGroups: 8, FFNHidden: 14336, SwiGLU: true,
		SeqLength: 4096, Vocab: 32000, MaxPositionEmbeddings: 4096, UntieEmbeddings: true, MoE: model.MoE{NumExperts: 8, TopK: 2}}
	var hosts []cluster.Host
	for i := 0; i < 4; i++ {
		hosts = append(hosts, cluster.Host{HostEntry: cluster.HostEntry{Name: "h" + string(rune('0'+i))}, GPUs: 4, GPU: gpuH100,
			IntraBytesPerS: 450e9, NICBytesPerS: 50e9, MemoryBytes: 1 << 40, PCIeBytesPerS: 25e9, CPUCores: 64, HostMemBytesPerS: 100e9})
	}
	bw := make([][]float64, 4)
	lat := make([][]float64, 4)
	for a := range bw {
		bw[a], lat[a] = make([]float64, 4), make([]float64, 4)
		for b := range bw[a] {
			bw[a][b], lat[a][b] = 25e9/8, 10e-6
			if a%2 == b%2 {
				bw[a][b], lat[a][b] = 50e9, 5e-6
			}
		}
	}
	c := cluster.NewCluster([]cluster.Island{{Spec: cluster.IslandSpec{Name: "x", GPUsPerHost: 4, GPU: gpuH100}, Hosts: []int{0, 1, 2, 3}, RDMA: true}}, hosts, bw, lat)
	res, err := Search(c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Seed: 1, TopK: 1,
		Fixed: parallel.Constraints{ZeroStage: -1, TP: 1, PP: 1, EP: 8, MicroBatch: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	// Hosts in file order would pair 0 with 1 and 2 with 3: slower.
	pp, err := NewPlacementProblem(c, m, p.Config, parallel.FrameworkMegatron)
	if err != nil {
		t.Fatal(err)
	}
	if naive, paired := pp.Cost([]int{0, 1, 2, 3}), pp.Cost([]int{0, 2, 1, 3}); naive <= paired {
		t.Errorf("file order costs %.3f s, fast pairs %.3f s: the all-to-all is not priced on its links", naive, paired)
	}
	for g, ranks := range epGroupsOf(p) {
		seen := map[int]bool{}
		for _, r := range ranks {
			seen[r.HostIndex] = true
		}
		if len(seen) != 2 {
			t.Errorf("EP group %d on %d hosts, want 2", g, len(seen))
		}
		for h := range seen {
			for o := range seen {
				if h%2 != o%2 {
					t.Errorf("EP group %d on hosts %d and %d, which share only the slow link", g, h, o)
				}
			}
		}
	}
}
