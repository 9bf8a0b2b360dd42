package templates

import (
	"fmt"
	"testing"

	"github.com/pipette-launch/pipette-launch/examples"
	"github.com/pipette-launch/pipette-launch/planner"
)

// TestSearchedPlansRenderAndPassChecks renders every plan the planner
// returns for the example clusters and checks each rank with Megatron's
// and DeepSpeed's start-up rules: the planner's output must always be
// expressible as a launch that starts.
func TestSearchedPlansRenderAndPassChecks(t *testing.T) {
	clusters := map[string][]byte{"default": examples.DefaultCluster, "two-clusters": mustRead(t, "../examples/two-clusters.yaml"), "small-offload": mustRead(t, "../examples/small-offload.yaml")}
	args := map[string][]string{
		"default":       {"--num-layers", "48", "--hidden-size", "6144", "--num-attention-heads", "48", "--seq-length", "4096", "--max-position-embeddings", "4096", "--vocab-size", "32000", "--bf16", "--swiglu"},
		"two-clusters":  {"--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8", "--ffn-hidden-size", "14336", "--swiglu", "--seq-length", "4096", "--max-position-embeddings", "8192", "--vocab-size", "128256", "--bf16"},
		"small-offload": {"--num-layers", "40", "--hidden-size", "5120", "--num-attention-heads", "40", "--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "50257", "--bf16"},
	}
	rendered := 0
	for name, data := range clusters {
		f, err := planner.ParseClusterFile(data)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		m, fixed, _, err := planner.ModelFromMegatronArgs(args[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, fw := range []planner.Framework{planner.FrameworkMegatron, planner.FrameworkDeepSpeed} {
			res, err := planner.Search(c, m, planner.SearchOptions{Framework: fw, GlobalBatch: 64, Fixed: fixed, TopK: 10, Seed: 1})
			if err != nil {
				t.Fatalf("%s %s: Search: %v", name, fw, err)
			}
			for i := range res.Plans {
				p := res.Plans[i]
				p.Framework = fw
				label := fmt.Sprintf("%s %s plan %d (TP%d PP%d DP%d CP%d VPP%d stages %v ZeRO%d offload %+v)", name, fw, i+1, p.TP, p.PP, p.DP, p.CP, p.VPP, p.StageLayers, p.ZeroStage, p.Offload)
				job, err := Render(&p, c, Options{Script: "pretrain_gpt.py", Args: args[name]})
				if err != nil {
					if fw == planner.FrameworkDeepSpeed && (p.VPP > 1 || !allEqual(p.StageLayers)) {
						continue // Megatron-DeepSpeed cannot express it; Render says so
					}
					t.Errorf("%s: Render: %v", label, err)
					continue
				}
				rendered++
				for _, h := range job.Hosts {
					for _, r := range h.Ranks {
						argv := r.Argv
						if fw == planner.FrameworkDeepSpeed {
							argv = append(argv[:3:3], argv[4:]...) // drop --local_rank=N
						}
						if err := checkRankForMegatron(RankJob{Env: r.Env, Argv: argv}); err != nil {
							t.Errorf("%s rank %d: %v", label, r.Rank, err)
						}
					}
				}
				for _, f := range job.Files {
					if f.Path == DSConfigFile {
						if err := CheckDSConfig(f.Content, p.DP, p.PP); err != nil {
							t.Errorf("%s: %v", label, err)
						}
					}
				}
			}
		}
	}
	t.Logf("%d searched plans rendered and checked", rendered)
	if rendered == 0 {
		t.Fatal("no searched plan rendered")
	}
}
