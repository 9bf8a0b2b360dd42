package search

import (
	"slices"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Issue 29: virtual stages were capped at 8 and needed the layers to
// divide the ranks, so NeMo's VP 12 (one layer per virtual stage: valid in
// Megatron) was refused when pinned and never searched, and Llama 3.1
// 405B's 126 layers on PP 8 VP 8 (Megatron-Bridge's recipe: the embedding
// and the loss counted as layers) were refused. Every split Megatron-LM
// accepts (megatron.VirtualSplits) is now a choice, searched and pinned.
func TestVirtualStagesAsMegatronAllowsThem(t *testing.T) {
	c := testCluster([]islandDef{{hosts: 8, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200}}, 0)
	llama405 := model.Model{Name: "llama3.1-405b", NumLayers: 126, Hidden: 16384, Heads: 128, QueryGroups: 8, FFNHidden: 53248, SwiGLU: true,
		SeqLength: 8192, Vocab: 128256, MaxPositionEmbeddings: 8192, UntieEmbeddings: true, PositionEmbedding: "rope"}
	for _, tc := range []struct {
		name       string
		m          model.Model
		fx         parallel.Constraints
		wantVPP    int
		wantLayers func([]int) bool
	}{
		{"searched: 96 layers on PP 8 try VP 12", gpt3_175b, parallel.Constraints{TP: 8, PP: 8, ZeroStage: -1}, 12,
			func(s []int) bool { return len(s) == 96 && slices.Max(s) == 1 }},
		{"pinned: VP 12", gpt3_175b, parallel.Constraints{TP: 8, PP: 8, VPP: 12, ZeroStage: -1}, 12,
			func(s []int) bool { return len(s) == 96 && slices.Max(s) == 1 }},
		{"pinned: 405B PP 8 VP 8, embedding and loss accounted", llama405, parallel.Constraints{TP: 8, PP: 8, VPP: 8, ZeroStage: -1}, 8,
			func(s []int) bool {
				return len(s) == 64 && s[0] == 1 && s[63] == 1 && slices.Max(s[1:63]) == 2 && slices.Min(s[1:63]) == 2
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 512, Fixed: tc.fx, TopK: 1, Seed: 1}
			found := false
			for _, cfg := range enumerate(c, tc.m, o, 80<<30) {
				if cfg.VPP == tc.wantVPP {
					found = true
					if !tc.wantLayers(cfg.StageLayers) {
						t.Errorf("VPP %d: stage layers %v", cfg.VPP, cfg.StageLayers)
					}
				}
			}
			if !found {
				t.Errorf("no config with VPP %d", tc.wantVPP)
			}
		})
	}
}
