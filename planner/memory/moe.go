package memory

import (
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Mixture-of-experts memory and time.
//
// Layout (Megatron-Core parallel_state): the expert layers reuse the ranks
// of TP x CP x DP inside each pipeline stage as ETP x EP x expert-DP, with
// expert ranks in tp-ep-dp order. An EP group is therefore EP x ETP
// consecutive ranks of a stage, EP x ETP / TP consecutive TP blocks (one
// block when that is below 1). Each GPU holds NumExperts/EP experts, each
// split over ETP; their gradients are reduced, and with the distributed
// optimizer their optimizer states sharded, over expert-DP =
// world / (ETP x EP x PP).
//
// Tokens: a GPU holds T/TP tokens of its micro-batch with sequence
// parallelism (T = seq x micro-batch / CP), routes each to TopK experts,
// and the alltoall dispatcher sends them to the EP ranks owning those
// experts, then all-gathers them over ETP. With balanced routing (what
// Megatron-Bridge's MoE benchmarks force) every GPU of an EP rank
// processes R = T x TopK x ETP / TP routed tokens, NumExperts/EP experts
// of R x EP / NumExperts tokens each. A capacity factor c caps every
// expert at c times that even share; the estimate then uses the cap (an
// expert's buffers can fill to it). Dropless routing has no cap and is
// priced at the even share: imbalance costs more than the estimate.

// MoERanks is what the MoE helpers need of a config.
type MoERanks struct {
	EP, ETP, TP float64
	SP          bool
}

func MoERanksOf(cfg parallel.Config) MoERanks {
	ep, etp := cfg.ExpertParallel()
	// DeepSpeed's token dropping splits the routed tokens over TP as
	// sequence parallelism does (Config.DropTokensTP).
	return MoERanks{EP: float64(ep), ETP: float64(etp), TP: float64(max(cfg.TP, 1)), SP: (cfg.SequenceParallel || cfg.DropTokensTP) && cfg.TP > 1}
}

// RoutedTokens is R, the routed token copies one GPU's experts process per
// micro-batch (capacity factor applied), for T local tokens.
func RoutedTokens(m model.Model, cfg parallel.Config, tokens float64) float64 {
	r := MoERanksOf(cfg)
	k := float64(m.MoETopK())
	per := tokens * k * r.ETP / r.TP
	if !r.SP && r.TP > 1 {
		per = tokens * k // every TP rank routes the full (replicated) sequence
	}
	if cf := m.CapacityFactor; cf > 0 {
		per *= cf
	}
	return per
}

// expertParamsPerGPU is one MoE layer's routed-expert parameters on a GPU.
func expertParamsPerGPU(m model.Model, cfg parallel.Config) float64 {
	r := MoERanksOf(cfg)
	return float64(m.NumExperts) / r.EP * float64(m.ExpertParameters()) / r.ETP
}

// moeLayerDenseParamsPerGPU is an MoE layer's non-expert parameters on one
// TP rank: attention and norms as in a dense layer, the shared experts
// split over TP, and the router (replicated over TP).
func moeLayerDenseParamsPerGPU(m model.Model, tp int) float64 {
	h := float64(m.Hidden)
	return attentionParamsPerGPU(m, tp) + float64(m.MLPMats())*h*float64(m.SharedFFN)/float64(tp) +
		float64(m.NumExperts)*h
}

// stageLayerRanges returns, for pipeline rank r, its dense and MoE layer
// counts over all its virtual stages (layers are assigned to stages in
// stage order, stage i = vpp_index*PP + pp_rank).
func rankLayerKinds(m model.Model, cfg parallel.Config, r int) (dense, moe int) {
	layers := StageLayersOf(m, cfg)
	if !m.IsMoE() && r >= 0 && r < cfg.PP {
		// A dense model's layers need no walk (the planner asks for every
		// rank of every candidate): rank r's stages are r, r+PP, ...
		for i := r; i < len(layers); i += cfg.PP {
			dense += layers[i]
		}
		return dense, 0
	}
	start := 0
	for i, n := range layers {
		if i%cfg.PP == r {
			k := m.MoELayersIn(start, n)
			moe += k
			dense += n - k
		}
		start += n
	}
	return dense, moe
}

// StageMoELayers is the MoE layer count of every stage (PP*VPP entries).
func StageMoELayers(m model.Model, stageLayers []int) []int {
	out := make([]int, len(stageLayers))
	start := 0
	for i, n := range stageLayers {
		out[i] = m.MoELayersIn(start, n)
		start += n
	}
	return out
}

// StageExpertParams is the routed-expert parameters pipeline rank r holds
// per GPU (reduced over expert-DP, not DP x CP).
func StageExpertParams(m model.Model, cfg parallel.Config, r int) float64 {
	if !m.IsMoE() {
		return 0
	}
	_, moe := rankLayerKinds(m, Normalized(cfg), r)
	return float64(moe) * expertParamsPerGPU(m, cfg)
}

// moeLayerActivationBytes is one MoE layer's stored activations for one
// micro-batch on one GPU: the attention part and replicated terms as a
// dense layer (layerActivationBytes with the shared experts as its MLP),
// plus per routed token the dispatched input (2h bytes, FC1's input), the
// expert MLP's stored intermediates (4 or 6 bytes per FFN/ETP column, as
// in the dense MLP) and the expert output kept for the combine (2h), and
// the router's fp32 logits and probabilities (8 bytes per expert per local
// token). Full recompute keeps only the layer input.
func moeLayerActivationBytes(m model.Model, cfg parallel.Config) float64 {
	return storedLayerBytes(m, cfg, moeFullLayerBytes)
}

func moeFullLayerBytes(m model.Model, cfg parallel.Config, s, b, h, t float64, sp, scores bool) float64 {
	v := layerBytesWithFFN(m, cfg, s, b, h, t, sp, scores, float64(m.SharedFFN))
	kmlp := 4.0
	if m.SwiGLU {
		kmlp = 6
	}
	r := MoERanksOf(cfg)
	local := s * b
	if sp {
		local /= t
	}
	routed := RoutedTokens(m, cfg, s*b)
	v += routed * (2*h + kmlp*float64(m.ExpertFFN())/r.ETP + 2*h)
	v += 8 * local * float64(m.NumExperts)
	return v
}

// dispatchBufferBytes is the alltoall dispatcher's transient working set
// of the one MoE layer running: the permuted tokens sent and the tokens
// received (2 bytes x h each), live at once.
func dispatchBufferBytes(m model.Model, cfg parallel.Config) float64 {
	if !m.IsMoE() {
		return 0
	}
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	return 2 * 2 * RoutedTokens(m, cfg, s*b) * float64(m.Hidden)
}
