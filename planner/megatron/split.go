package megatron

import (
	"fmt"
	"slices"
	"strconv"
)

// The flags of Megatron-LM's layer split besides the virtual-stage count.
const (
	FirstStageLayersFlag = "--decoder-first-pipeline-num-layers"
	LastStageLayersFlag  = "--decoder-last-pipeline-num-layers"
	EmbeddingInSplitFlag = "--account-for-embedding-in-pipeline-split"
	LossInSplitFlag      = "--account-for-loss-in-pipeline-split"
)

// Split is a split of the decoder layers over pipeline stages as
// Megatron-LM's flags describe it: PP ranks of VPP virtual stages each,
// optionally an uneven first and last rank (First, Last: their layers; 0
// unset), or the embedding and the loss counted as one layer each of the
// first and last virtual stage (Embedding, Loss).
type Split struct {
	PP, VPP         int
	First, Last     int
	Embedding, Loss bool
}

// StageLayers is the decoder layers of every virtual stage (i =
// vpp_index*PP + pp_rank) Megatron-Core builds for s (core_v0.19.0's
// get_num_layers_to_build, get_transformer_layer_offset), or the error its
// TransformerConfig checks raise. A rank's layers split evenly over its
// virtual stages; an accounted embedding (loss) takes one layer's place
// in the first (last) virtual stage.
func (s Split) StageLayers(numLayers int) ([]int, error) {
	vpp := max(s.VPP, 1)
	if s.PP < 1 || numLayers < 1 {
		return nil, fmt.Errorf("a layer split needs pp >= 1 and layers >= 1 (pp %d, %d layers)", s.PP, numLayers)
	}
	uneven := s.First > 0 || s.Last > 0
	if uneven && (s.Embedding || s.Loss) {
		return nil, fmt.Errorf("%s/%s cannot be combined with %s or %s (Megatron-Core's TransformerConfig)", FirstStageLayersFlag, LastStageLayersFlag, EmbeddingInSplitFlag, LossInSplitFlag)
	}
	perRank, err := s.ranks(numLayers, vpp, uneven)
	if err != nil {
		return nil, err
	}
	stages := make([]int, s.PP*vpp)
	for i := range stages {
		stages[i] = perRank[i%s.PP] / vpp
	}
	if s.Embedding {
		if stages[0]--; stages[0] < 0 {
			return nil, fmt.Errorf("%s: the first virtual stage has no layer's place for the embedding", EmbeddingInSplitFlag)
		}
	}
	if s.Loss {
		if stages[len(stages)-1]--; stages[len(stages)-1] < 0 {
			return nil, fmt.Errorf("%s: the last virtual stage has no layer's place for the loss", LossInSplitFlag)
		}
	}
	return stages, nil
}

// ranks is the layers of every pipeline rank (accounted embedding and
// loss included), checked as TransformerConfig.__post_init__ does.
func (s Split) ranks(numLayers, vpp int, uneven bool) ([]int, error) {
	perRank := make([]int, s.PP)
	if !uneven {
		total := s.accountedLayers(numLayers)
		accounted := ""
		if total != numLayers {
			accounted = fmt.Sprintf(" (%d with the accounted embedding/loss)", total)
		}
		if total%s.PP != 0 {
			return nil, fmt.Errorf("--num-layers %d%s is not divisible by pp %d", numLayers, accounted, s.PP)
		}
		if (total/s.PP)%vpp != 0 {
			return nil, fmt.Errorf("%d layers per pipeline rank%s do not divide into %d virtual stages", total/s.PP, accounted, vpp)
		}
		for r := range perRank {
			perRank[r] = total / s.PP
		}
		return perRank, nil
	}
	rest, middle := numLayers, s.PP
	for _, end := range []struct {
		n, rank int
		flag    string
	}{{s.First, 0, FirstStageLayersFlag}, {s.Last, s.PP - 1, LastStageLayersFlag}} {
		if end.n <= 0 {
			continue
		}
		if end.n%vpp != 0 {
			return nil, fmt.Errorf("%s %d must be divisible by the %d virtual stages", end.flag, end.n, vpp)
		}
		perRank[end.rank] = end.n
		rest -= end.n
		middle--
	}
	switch {
	case middle < 0 || (rest != 0) != (middle != 0) || rest < 0:
		return nil, fmt.Errorf("%s/%s leave %d layers for %d middle pipeline ranks", FirstStageLayersFlag, LastStageLayersFlag, rest, max(middle, 0))
	case middle > 0 && rest%middle != 0:
		return nil, fmt.Errorf("%d remaining layers do not divide evenly over %d middle pipeline ranks", rest, middle)
	case middle > 0 && (rest/middle)%vpp != 0:
		return nil, fmt.Errorf("%d layers on each middle pipeline rank do not divide evenly into %d virtual stages", rest/middle, vpp)
	}
	for r := range perRank {
		if (r != 0 || s.First <= 0) && (r != s.PP-1 || s.Last <= 0) {
			perRank[r] = rest / middle
		}
	}
	return perRank, nil
}

// accountedLayers is numLayers with the embedding and the loss counted
// as layers where s accounts them.
func (s Split) accountedLayers(numLayers int) int {
	for _, counted := range []bool{s.Embedding, s.Loss} {
		if counted {
			numLayers++
		}
	}
	return numLayers
}

// Flags renders s as Megatron-LM's arguments (the virtual stages when
// VPP > 1, then the uneven or accounting flags set).
func (s Split) Flags() []string {
	var out []string
	if s.VPP > 1 {
		out = append(out, "--num-virtual-stages-per-pipeline-rank", strconv.Itoa(s.VPP))
	}
	if s.First > 0 {
		out = append(out, FirstStageLayersFlag, strconv.Itoa(s.First))
	}
	if s.Last > 0 {
		out = append(out, LastStageLayersFlag, strconv.Itoa(s.Last))
	}
	if s.Embedding {
		out = append(out, EmbeddingInSplitFlag)
	}
	if s.Loss {
		out = append(out, LossInSplitFlag)
	}
	return out
}

// accountings are the embedding/loss accountings in the order tried: none,
// both (Megatron-Bridge's Llama 3.1 405B recipe), then either alone.
var accountings = [][2]bool{{false, false}, {true, true}, {true, false}, {false, true}}

// VirtualSplits are the splits Megatron-LM accepts for numLayers on pp
// ranks with more than one virtual stage each: every virtual-stage count
// that divides a rank's layers; where the layers do not divide over the
// ranks, a rank's layers counting the embedding and loss as
// Megatron-Bridge's recipes do (the first accounting in accountings that
// divides them). Every virtual stage holds at least one layer (a stage
// with only the embedding or the loss is not planned). Ascending VPP.
func VirtualSplits(numLayers, pp int) []Split {
	if pp < 2 || numLayers < 1 {
		return nil
	}
	for _, a := range accountings {
		base := Split{PP: pp, VPP: 1, Embedding: a[0], Loss: a[1]}
		if _, err := base.StageLayers(numLayers); err != nil {
			continue
		}
		var out []Split
		for vpp := 2; vpp <= (numLayers+2)/pp; vpp++ {
			s := base
			s.VPP = vpp
			if stages, err := s.StageLayers(numLayers); err == nil && slices.Min(stages) >= 1 {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// SplitOf is the split whose stages are stages (pp ranks of vpp virtual
// stages, numLayers in all); false when only a
// --pipeline-model-parallel-layout expresses them.
func SplitOf(stages []int, numLayers, pp, vpp int) (Split, bool) {
	vpp = max(vpp, 1)
	if pp < 1 || len(stages) != pp*vpp {
		return Split{}, false
	}
	rankLayers := func(r int) int {
		n := 0
		for v := range vpp {
			n += stages[v*pp+r]
		}
		return n
	}
	first, last := rankLayers(0), rankLayers(pp-1)
	var tries []Split
	for _, a := range accountings {
		tries = append(tries, Split{PP: pp, VPP: vpp, Embedding: a[0], Loss: a[1]})
	}
	if pp >= 2 {
		tries = append(tries, Split{PP: pp, VPP: vpp, First: first, Last: last}, Split{PP: pp, VPP: vpp, First: first}, Split{PP: pp, VPP: vpp, Last: last})
	}
	for _, s := range tries {
		if got, err := s.StageLayers(numLayers); err == nil && slices.Equal(got, stages) {
			return s, true
		}
	}
	return Split{}, false
}
