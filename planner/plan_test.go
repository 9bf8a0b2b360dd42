package planner

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/megatron/tpoverlap"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

func twoIslands(t *testing.T) *cluster.File {
	t.Helper()
	b, err := os.ReadFile("../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// OnFabric prices again on sockets only when one network per group type
// was asked for, the job spans islands, and the renderer cannot keep it;
// when that is known before planning, it plans once, on sockets.
func TestOnFabric(t *testing.T) {
	t.Parallel()
	f := twoIslands(t)
	for _, tc := range []struct {
		name     string
		t        fabric.Transport
		oneIsle  bool
		fallback string
		ahead    string // the fallback known before planning
		want     []fabric.Transport
		plans    int
	}{
		{"islands kept", fabric.TransportIslands, false, "", "", []fabric.Transport{fabric.TransportIslands}, 1},
		{"islands fall back", fabric.TransportIslands, false, "no NCCL version", "", []fabric.Transport{fabric.TransportIslands, fabric.TransportSockets}, 2},
		{"fallback known ahead", fabric.TransportIslands, false, "no NCCL version", "no NCCL version", []fabric.Transport{fabric.TransportIslands, fabric.TransportSockets}, 1},
		{"one island", fabric.TransportIslands, true, "no NCCL version", "no NCCL version", []fabric.Transport{fabric.TransportIslands}, 1},
		{"auto", fabric.TransportAuto, false, "no NCCL version", "no NCCL version", []fabric.Transport{fabric.TransportAuto}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resolved []fabric.Transport
			resolve := func(tr fabric.Transport) (*cluster.Cluster, error) {
				resolved = append(resolved, tr)
				g := *f
				if tc.oneIsle {
					g.Clusters = g.Clusters[:1]
					g.Links = nil
				}
				return g.ResolveFor(tr)
			}
			plans := 0
			plan := func(c *cluster.Cluster) (int, *search.Plan, error) {
				plans++
				return plans, &search.Plan{}, nil
			}
			c, n, err := OnFabric(tc.t, resolve, plan, func(*cluster.Cluster, *search.Plan) string { return tc.fallback },
				func(*cluster.Cluster) string { return tc.ahead })
			if err != nil || c == nil {
				t.Fatal(err)
			}
			if !slices.Equal(resolved, tc.want) || n != tc.plans {
				t.Errorf("priced on %v (%d plans), want %v (%d plans)", resolved, n, tc.want, tc.plans)
			}
		})
	}
}

func TestTorchrunOrder(t *testing.T) {
	t.Parallel()
	c, err := twoIslands(t).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	p, summary, err := TorchrunOrder(c, parallel.FrameworkMegatron, parallel.Constraints{TP: 4, PP: 2}, 0, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if p.TP != 4 || p.PP != 2 || p.DP != 4 || p.MicroBatch != 1 || p.GlobalBatch != 4 || !p.Offload.Params || len(p.Placement) != 32 {
		t.Errorf("plan %+v", p.Config)
	}
	if r := p.Placement[9]; r.HostIndex != 1 || r.LocalRank != 1 {
		t.Errorf("rank 9 on host %d local rank %d, want host 1 local rank 1", r.HostIndex, r.LocalRank)
	}
	if !strings.Contains(summary, "32 ranks on 4 host(s), TP 4 PP 2 CP 1 DP 4") {
		t.Errorf("summary %q", summary)
	}
	if _, _, err := TorchrunOrder(c, parallel.FrameworkMegatron, parallel.Constraints{TP: 3}, 0, 0, false); err == nil {
		t.Error("TP 3 on 32 ranks accepted")
	}
	// A DP pinned (an elastic restart's checkpoint's) that the ranks do
	// not give is refused, naming both.
	if _, _, err := TorchrunOrder(c, parallel.FrameworkMegatron, parallel.Constraints{TP: 4, DP: 4}, 0, 0, false); err == nil || !strings.Contains(err.Error(), "gives DP 8 (32 ranks / TP x PP x CP 4), not the DP 4 asked for") {
		t.Errorf("TP 4 DP 4 on 32 ranks: %v", err)
	}
	if p, _, err := TorchrunOrder(c, parallel.FrameworkMegatron, parallel.Constraints{TP: 4, DP: 8}, 0, 0, false); err != nil || p.DP != 8 {
		t.Errorf("TP 4 DP 8 on 32 ranks: %v", err)
	}
}

func TestCheckFixedSizes(t *testing.T) {
	t.Parallel()
	m := model.Model{NumLayers: 4, Heads: 8}
	for _, tc := range []struct {
		fixed parallel.Constraints
		want  string
	}{
		{parallel.Constraints{TP: 2, PP: 2}, ""},
		{parallel.Constraints{TP: 3}, "does not divide --num-attention-heads 8"},
		{parallel.Constraints{TP: 8, PP: 4}, "needs 32 GPUs, the cluster has 16"},
		{parallel.Constraints{PP: 8}, "more than the 4 layers"},
	} {
		err := CheckFixedSizes(m, tc.fixed, 16)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.fixed, err, tc.want)
		}
	}
}

// The launcher's --sequence-parallel against the script's own choice: on
// contradicts a script without it; auto (nil) keeps the script's.
func TestApplySequenceParallel(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	fx := parallel.Constraints{SequenceParallel: &no}
	if err := ApplySequenceParallel(&yes, "on", &fx, true); err == nil || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("--sequence-parallel on with a script without it: %v", err)
	}
	fx = parallel.Constraints{SequenceParallel: &yes}
	if err := ApplySequenceParallel(nil, "auto", &fx, true); err != nil || !*fx.SequenceParallel {
		t.Fatalf("auto changed the script's choice: %v", err)
	}
}

// Bridge's review: `run` planned with Transformer Engine's default
// userbuffers settings where `plan --as-is` read the script's
// --tp-comm-overlap-cfg. Choose now prices the configuration the caller
// read (Job.TPOverlapCfg), and only when the script overlaps.
func TestChooseCarriesTPOverlapCfg(t *testing.T) {
	t.Parallel()
	c, err := twoIslands(t).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	ubData, err := os.ReadFile("megatron/tpoverlap/testdata/tp_overlap/ub_cfg_h100_fp8_h16384_tp8_cp2_mbs1_seqlen8192.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ub, err := tpoverlap.Parse(ubData)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 " +
		"--vocab-size 128256 --micro-batch-size 1 --global-batch-size 64 --bf16 --tensor-model-parallel-size 8 --sequence-parallel")
	choose := func(args []string, cfg *parallel.TPOverlapCfg) *search.Plan {
		t.Helper()
		ch, err := Choose(c, Job{Framework: parallel.FrameworkMegatron, Script: "pretrain_gpt.py", Args: args, TPOverlapCfg: cfg, PlanIndex: 1}, true)
		if err != nil {
			t.Fatal(err)
		}
		return ch.Plan
	}
	overlap := append(slices.Clone(args), "--tp-comm-overlap")
	defaults, given := choose(overlap, nil), choose(overlap, &ub)
	if given.TPOverlapCfg == nil || defaults.TPOverlapCfg != nil {
		t.Fatalf("plan's userbuffers configuration: %v with the file, %v without: want the file's, then none", given.TPOverlapCfg, defaults.TPOverlapCfg)
	}
	if given.Predicted.IterationSeconds == defaults.Predicted.IterationSeconds {
		t.Errorf("the file's configuration priced as TE's defaults: %.4f s both", given.Predicted.IterationSeconds)
	}
	if p := choose(args, &ub); p.TPOverlapCfg != nil || p.TPCommOverlap {
		t.Errorf("a script without --tp-comm-overlap planned with the overlap: %+v", p.Config)
	}
}
