package planner

import "math"

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

// moeRanks is what the MoE helpers need of a config.
type moeRanks struct {
	ep, etp, tp float64
	sp          bool
}

func moeRanksOf(cfg Config) moeRanks {
	ep, etp := cfg.ExpertParallel()
	return moeRanks{ep: float64(ep), etp: float64(etp), tp: float64(max(cfg.TP, 1)), sp: cfg.SequenceParallel && cfg.TP > 1}
}

// routedTokens is R, the routed token copies one GPU's experts process per
// micro-batch (capacity factor applied), for T local tokens.
func routedTokens(m Model, cfg Config, tokens float64) float64 {
	r := moeRanksOf(cfg)
	k := float64(m.MoETopK())
	per := tokens * k * r.etp / r.tp
	if !r.sp && r.tp > 1 {
		per = tokens * k // every TP rank routes the full (replicated) sequence
	}
	if cf := m.CapacityFactor; cf > 0 {
		per *= cf
	}
	return per
}

// expertParamsPerGPU is one MoE layer's routed-expert parameters on a GPU.
func expertParamsPerGPU(m Model, cfg Config) float64 {
	r := moeRanksOf(cfg)
	return float64(m.NumExperts) / r.ep * float64(m.ExpertParameters()) / r.etp
}

// moeLayerDenseParamsPerGPU is an MoE layer's non-expert parameters on one
// TP rank: attention and norms as in a dense layer, the shared experts
// split over TP, and the router (replicated over TP).
func moeLayerDenseParamsPerGPU(m Model, tp int) float64 {
	h := float64(m.Hidden)
	return attentionParamsPerGPU(m, tp) + float64(m.mlpMats())*h*float64(m.SharedFFN)/float64(tp) +
		float64(m.NumExperts)*h
}

// stageLayerRanges returns, for pipeline rank r, its dense and MoE layer
// counts over all its virtual stages (layers are assigned to stages in
// stage order, stage i = vpp_index*PP + pp_rank).
func rankLayerKinds(m Model, cfg Config, r int) (dense, moe int) {
	layers := StageLayersOf(m, cfg)
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

// stageMoELayers is the MoE layer count of every stage (PP*VPP entries).
func stageMoELayers(m Model, stageLayers []int) []int {
	out := make([]int, len(stageLayers))
	start := 0
	for i, n := range stageLayers {
		out[i] = m.MoELayersIn(start, n)
		start += n
	}
	return out
}

// stageExpertParams is the routed-expert parameters pipeline rank r holds
// per GPU (reduced over expert-DP, not DP x CP).
func stageExpertParams(m Model, cfg Config, r int) float64 {
	if !m.IsMoE() {
		return 0
	}
	_, moe := rankLayerKinds(m, normalized(cfg), r)
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
func moeLayerActivationBytes(m Model, cfg Config) float64 {
	return storedLayerBytes(m, cfg, moeFullLayerBytes)
}

func moeFullLayerBytes(m Model, cfg Config, s, b, h, t float64, sp, scores bool) float64 {
	v := layerBytesWithFFN(m, cfg, s, b, h, t, sp, scores, float64(m.SharedFFN))
	kmlp := 4.0
	if m.SwiGLU {
		kmlp = 6
	}
	r := moeRanksOf(cfg)
	local := s * b
	if sp {
		local /= t
	}
	routed := routedTokens(m, cfg, s*b)
	v += routed * (2*h + kmlp*float64(m.ExpertFFN())/r.etp + 2*h)
	v += 8 * local * float64(m.NumExperts)
	return v
}

// dispatchBufferBytes is the alltoall dispatcher's transient working set
// of the one MoE layer running: the permuted tokens sent and the tokens
// received (2 bytes x h each), live at once.
func dispatchBufferBytes(m Model, cfg Config) float64 {
	if !m.IsMoE() {
		return 0
	}
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	return 2 * 2 * routedTokens(m, cfg, s*b) * float64(m.Hidden)
}

// moeAllToAllBytes is what one GPU sends in one dispatch (or combine)
// all-to-all of one MoE layer and one micro-batch: its local tokens x TopK
// copies x h x 2 bytes, of which (EP-1)/EP leave the GPU. The ETP
// all-gather (reduce-scatter in the combine) of the received tokens is
// etpGatherBytes.
func moeAllToAllBytes(m Model, cfg Config) (perGPU float64) {
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	r := moeRanksOf(cfg)
	local := s * b
	if r.sp {
		local /= r.tp
	}
	return local * float64(m.MoETopK()) * float64(m.Hidden) * bytesPerElem
}

// etpGatherBytes is the gathered buffer of the ETP all-gather after the
// dispatch: all R routed tokens x h x 2 bytes.
func etpGatherBytes(m Model, cfg Config) float64 {
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	return routedTokens(m, cfg, s*b) / math.Max(m.CapacityFactorOr1(), 1e-9) * float64(m.Hidden) * bytesPerElem
}

// CapacityFactorOr1 is the capacity factor, 1 when dropless.
func (m Model) CapacityFactorOr1() float64 {
	if m.CapacityFactor > 0 {
		return m.CapacityFactor
	}
	return 1
}

// moeForwardFLOPs is an MoE layer's forward model FLOPs: attention, the
// router, the shared experts and TopK routed experts per token (dropped
// tokens and capacity padding not counted).
func (s layerShape) moeForwardFLOPs(m Model) float64 {
	router := 2 * s.tokens * s.hidden * float64(m.NumExperts)
	return s.attnGemmFLOPs() + s.attnFLOPs() + s.mlpFLOPs(float64(m.SharedFFN)) + router +
		float64(m.MoETopK())*s.mlpFLOPs(float64(m.ExpertFFN()))
}

// moeCompute is an MoE layer's compute on one GPU for one micro-batch:
// attention as in a dense layer, the shared experts (TP-split MLP), the
// router GEMM over the local tokens, the routed experts as one grouped
// GEMM per projection (Megatron's --moe-grouped-gemm: one launch for all
// local experts) priced per expert at its own token count through the
// efficiency curve, and the permute/unpermute and activation traffic of
// the routed tokens.
type moeCompute struct {
	computeCost
}

func moeLayerCompute(m Model, cfg Config, g GPUSpec) moeCompute {
	s := newLayerShape(m, cfg)
	cv := curveOf(g)
	r := moeRanksOf(cfg)
	attn := s.attnSeconds(g, cv)
	shared := s.mlpSeconds(g, cv, float64(m.SharedFFN))
	local := s.tokens
	if s.sp {
		local /= s.tp
	}
	router := gemmSeconds(g, cv, PrecisionBF16, local, float64(m.NumExperts), s.hidden) +
		3*4*local*float64(m.NumExperts)/gpuHBMBytesPerS(g) // fp32 logits: softmax, top-k
	routed := routedTokens(m, cfg, s.tokens) / m.CapacityFactorOr1()
	nLocal := float64(m.NumExperts) / r.ep
	perExpert := routed / nLocal
	fe := float64(m.ExpertFFN())
	up := fe
	if m.SwiGLU {
		up = 2 * fe
	}
	one := gemmSeconds(g, cv, s.prec, perExpert, up/r.etp, s.hidden) + gemmSeconds(g, cv, s.prec, perExpert, s.hidden, fe/r.etp)
	experts := nLocal*one - (nLocal-1)*2*gemmLaunchS
	// permute + unpermute each read and write the routed tokens; the
	// activation function runs over their FFN columns.
	traffic := 2*2*routed*s.hidden*bytesPerElem + cv.ElemScale*bytesPerElem*elemwiseFFNElems*routed*fe/r.etp
	fwd := s.attnGemmSeconds(g, cv) + attn + s.elemwiseSecondsFFN(g, cv, float64(m.SharedFFN)) + shared + router +
		experts + traffic/gpuHBMBytesPerS(g)
	return moeCompute{computeCost: withBackward(fwd, attn, cfg.Recompute)}
}

// AllToAllSeconds prices one all-to-all in which a GPU sends intraBytes to
// members on its own host and interBytes to members on other hosts: the
// two run at once (NVLink and NIC), each at its link's rate, plus one
// latency of the slower path (NCCL issues every send together).
func AllToAllSeconds(intraBytes, interBytes float64, intra, inter Link) float64 {
	t, lat := 0.0, 0.0
	if intraBytes > 0 {
		t, lat = intraBytes/intra.BytesPerS, intra.LatencyS
	}
	if interBytes > 0 {
		t, lat = math.Max(t, interBytes/inter.BytesPerS), math.Max(lat, inter.LatencyS)
	}
	return t + lat
}

// epGroupBlocks is how many consecutive TP blocks one EP group spans.
func epGroupBlocks(cfg Config) int {
	ep, etp := cfg.ExpertParallel()
	return max(1, ep*etp/max(cfg.TP, 1))
}

// moeA2APerLayer is the exposed expert-parallel communication of one MoE
// layer and micro-batch for the EP group whose blocks sit on hosts (-1:
// unplaced, priced on the fastest link): forward a dispatch and a combine
// all-to-all plus, with ETP > 1, the ETP all-gather and reduce-scatter
// inside the host; backward the same again; full recompute repeats the
// forward. Megatron's alltoall dispatcher runs them on the critical path
// (its overlaps, --moe-shared-expert-overlap and
// --overlap-moe-expert-parallel-comm, are off by default and not rendered).
func (e *planEval) moeA2APerLayer(hosts []int) (fwd, bwd float64) {
	ep, etp := e.cfg.ExpertParallel()
	bytes := moeAllToAllBytes(e.m, e.cfg)
	var a2a float64
	if ep > 1 {
		a2a = e.a2aSeconds(hosts, ep, bytes)
	}
	intra := e.bestLnk
	if len(hosts) > 0 && hosts[0] >= 0 {
		intra = e.c.LinkBetween(hosts[0], hosts[0])
	}
	gather := AllGatherSeconds(etpGatherBytes(e.m, e.cfg), etp, intra)
	one := 2*a2a + 2*gather
	fwd, bwd = one, one
	if e.cfg.Recompute == RecomputeFull {
		bwd += fwd
	}
	return fwd, bwd
}

// a2aSeconds is the slowest member's all-to-all: every GPU of a host runs
// its own all-to-all at the same moment (all EP groups are in the same
// layer), so a GPU gets 1/GPUs of its host's inter-host bandwidth, on the
// slowest host pair of the group.
func (e *planEval) a2aSeconds(hosts []int, ep int, bytes float64) float64 {
	perBlock := float64(ep) / float64(len(hosts))
	worst := 0.0
	for i, h := range hosts {
		same := 0
		inter := Link{BytesPerS: math.Inf(1)}
		for _, o := range hosts {
			if o == h {
				same++
				continue
			}
			l := e.bestLnk
			if h >= 0 && o >= 0 {
				l = e.c.LinkBetween(h, o)
				l.BytesPerS /= float64(e.c.Hosts[h].GPUs)
			}
			inter.BytesPerS = math.Min(inter.BytesPerS, l.BytesPerS)
			inter.LatencyS = math.Max(inter.LatencyS, l.LatencyS)
		}
		intra := e.bestLnk
		if h >= 0 {
			intra = e.c.LinkBetween(h, h)
		}
		onHost := float64(same) * perBlock
		t := AllToAllSeconds(bytes*(onHost-1)/float64(ep), bytes*(float64(ep)-onHost)/float64(ep), intra, inter)
		if i == 0 || t > worst {
			worst = t
		}
	}
	return worst
}

// epGroupHosts fills hosts with the hosts of the blocks of the EP group
// that block (r, d, c) belongs to.
func (e *planEval) epGroupHosts(blockHost []int, r, d, c int, hosts []int) []int {
	n := e.epBlocks
	q := c + d*e.cp
	start := q / n * n
	hosts = hosts[:0]
	for x := start; x < start+n; x++ {
		hosts = append(hosts, blockHost[e.block(r, x/e.cp, x%e.cp)])
	}
	return hosts
}

// moeGradParams is what pipeline rank r reduces per GPU, in units of the
// DP x CP ring dpCommSeconds prices: its dense parameters, plus its expert
// parameters scaled by how much less an expert-DP ring moves
// ((n-1)/n of the buffer for a ring of n).
func moeGradParams(m Model, cfg Config, r int) float64 {
	p := StageParameters(m, cfg, r)
	pe := stageExpertParams(m, cfg, r)
	n, edp := float64(cfg.DP*cfg.CP), float64(cfg.ExpertDP())
	if n <= 1 {
		return p
	}
	return p - pe + pe*((edp-1)/edp)/((n-1)/n)
}

// moeOwnedParams is the parameters whose optimizer step rank r's GPU runs:
// with the distributed optimizer dense ones sharded over DP x CP, expert
// ones over expert-DP.
func moeOwnedParams(m Model, cfg Config, r int) float64 {
	p := StageParameters(m, cfg, r)
	if !cfg.DistributedOptimizer {
		return p
	}
	pe := stageExpertParams(m, cfg, r)
	return (p-pe)/float64(max(cfg.DP*cfg.CP, 1)) + pe/float64(cfg.ExpertDP())
}
