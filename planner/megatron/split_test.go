package megatron

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// splitArgs is a 405B-like argument list: numLayers layers on pp ranks.
func splitArgs(numLayers, pp int, extra ...string) []string {
	return append([]string{"--num-layers", strconv.Itoa(numLayers), "--hidden-size", "16384", "--num-attention-heads", "128",
		"--seq-length", "8192", "--pipeline-model-parallel-size", strconv.Itoa(pp), "--global-batch-size", "512"}, extra...)
}

// Issue 29: virtual stages as Megatron-LM core_v0.19.0 allows them (any
// count that splits a rank's layers, one layer per virtual stage
// included; the embedding and loss accounting flags; uneven first/last
// ranks with virtual stages), checked by the one checker the search and
// the pinned path share. The rules are validate_args' and
// TransformerConfig.__post_init__'s, the stages get_num_layers_to_build's.
func TestSplitAsMegatronAllowsIt(t *testing.T) {
	two := func(n int, ends ...int) []int { // n stages of 2, ends[i] at stage i (negative: from the end)
		s := make([]int, n)
		for i := range s {
			s[i] = 2
		}
		for i := 0; i+1 < len(ends); i += 2 {
			at := ends[i]
			if at < 0 {
				at += n
			}
			s[at] = ends[i+1]
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		layers int
		split  Split
		want   []int
		err    string
	}{
		{name: "NeMo VP 12: one layer per virtual stage (96 layers, PP 8)", layers: 96, split: Split{PP: 8, VPP: 12}, want: slices.Repeat([]int{1}, 96)},
		{name: "NeMo VP 20 (80 layers, PP 4)", layers: 80, split: Split{PP: 4, VPP: 20}, want: slices.Repeat([]int{1}, 80)},
		{name: "Llama 3.1 405B PP 8 VP 8, embedding and loss accounted", layers: 126, split: Split{PP: 8, VPP: 8, Embedding: true, Loss: true}, want: two(64, 0, 1, -1, 1)},
		{name: "Llama 3.1 405B PP 8 VP 8 unaccounted", layers: 126, split: Split{PP: 8, VPP: 8}, err: "--num-layers 126 is not divisible by pp 8"},
		{name: "embedding alone", layers: 127, split: Split{PP: 8, VPP: 4, Embedding: true}, want: append([]int{3}, slices.Repeat([]int{4}, 31)...)},
		{name: "accounted stage left empty", layers: 14, split: Split{PP: 8, VPP: 2, Embedding: true, Loss: true}, want: append(append([]int{0}, slices.Repeat([]int{1}, 14)...), 0)},
		{name: "uneven first/last with VP 2", layers: 20, split: Split{PP: 4, VPP: 2, First: 4, Last: 4}, want: []int{2, 3, 3, 2, 2, 3, 3, 2}},
		{name: "first not divisible by VP", layers: 20, split: Split{PP: 4, VPP: 2, First: 3}, err: "divisible by the 2 virtual stages"},
		{name: "uneven with accounting", layers: 126, split: Split{PP: 8, First: 15, Embedding: true}, err: "cannot be combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.split.StageLayers(tc.layers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("StageLayers = %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("StageLayers = %v, %v; want %v", got, err, tc.want)
			}
			// The checker accepts the flags, reads back the same split,
			// and SplitOf finds flags for it.
			args := splitArgs(tc.layers, tc.split.PP, tc.split.Flags()...)
			if err := CheckArgs(args, 8*tc.split.PP); err != nil {
				t.Errorf("CheckArgs(%v): %v", tc.split.Flags(), err)
			}
			stages, vpp, err := StageLayers(args)
			if err != nil || vpp != max(tc.split.VPP, 1) || (stages != nil && !slices.Equal(stages, tc.want)) {
				t.Errorf("StageLayers(args) = %v, vpp %d, %v", stages, vpp, err)
			}
			if s, ok := SplitOf(tc.want, tc.layers, tc.split.PP, tc.split.VPP); !ok {
				t.Errorf("SplitOf(%v) found no flags", tc.want)
			} else if again, _ := s.StageLayers(tc.layers); !slices.Equal(again, tc.want) {
				t.Errorf("SplitOf gave %+v: %v", s, again)
			}
		})
	}
}

// The search's virtual-stage choices: beyond 8, every count Megatron
// accepts, the embedding and loss accounted where the layers do not divide
// the ranks, and no virtual stage left without a layer.
func TestVirtualSplits(t *testing.T) {
	vpps := func(l, pp int) []int {
		var out []int
		for _, s := range VirtualSplits(l, pp) {
			out = append(out, s.VPP)
		}
		return out
	}
	if got := vpps(96, 8); !slices.Equal(got, []int{2, 3, 4, 6, 12}) {
		t.Errorf("96 layers on PP 8: VPP %v, want 2 3 4 6 12", got)
	}
	if got := vpps(80, 4); !slices.Contains(got, 10) || !slices.Contains(got, 20) {
		t.Errorf("80 layers on PP 4: VPP %v, want 10 and 20 among them", got)
	}
	got := VirtualSplits(126, 8)
	if !slices.ContainsFunc(got, func(s Split) bool { return s == Split{PP: 8, VPP: 8, Embedding: true, Loss: true} }) {
		t.Errorf("126 layers on PP 8: %+v, want VP 8 with the embedding and loss accounted", got)
	}
	if slices.ContainsFunc(got, func(s Split) bool { return s.VPP == 16 }) {
		t.Errorf("126 layers on PP 8: VP 16 leaves the first virtual stage with the embedding alone: %+v", got)
	}
}

// Megatron-LM's validate_args counts the accounted embedding and loss when
// it converts --num-layers-per-virtual-pipeline-stage, and refuses that
// flag beside uneven first/last ranks.
func TestLayersPerVirtualStageCountsTheAccountedLayers(t *testing.T) {
	args := splitArgs(126, 8, "--num-layers-per-virtual-pipeline-stage", "2", EmbeddingInSplitFlag, LossInSplitFlag)
	if err := CheckArgs(args, 64); err != nil {
		t.Fatalf("CheckArgs: %v", err)
	}
	if _, vpp, err := StageLayers(args); err != nil || vpp != 8 {
		t.Errorf("StageLayers: vpp %d, %v; want 8", vpp, err)
	}
	bad := splitArgs(24, 4, "--num-layers-per-virtual-pipeline-stage", "2", FirstStageLayersFlag, "4")
	if err := CheckArgs(bad, 32); err == nil || !strings.Contains(err.Error(), "--num-virtual-stages-per-pipeline-rank") {
		t.Errorf("CheckArgs(%v) = %v, want the uneven split refused", bad, err)
	}
	// The model reader (the pinned path) agrees.
	_, fixed, _, err := ModelFromArgsVocab(splitArgs(126, 8, "--num-virtual-stages-per-pipeline-rank", "8", EmbeddingInSplitFlag, LossInSplitFlag, "--vocab-size", "128256"), nil)
	if err != nil || fixed.VPP != 8 || len(fixed.StageLayers) != 64 || fixed.StageLayers[0] != 1 || fixed.StageLayers[63] != 1 {
		t.Errorf("ModelFromArgsVocab: VPP %d stages %v, %v", fixed.VPP, fixed.StageLayers, err)
	}
}
