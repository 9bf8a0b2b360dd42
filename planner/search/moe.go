package search

import (
	"math"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// moeAllToAllBytes is what one GPU sends in one dispatch (or combine)
// all-to-all of one MoE layer and one micro-batch: its local tokens x TopK
// copies x h x 2 bytes, of which (EP-1)/EP leave the GPU. The ETP
// all-gather (reduce-scatter in the combine) of the received tokens is
// etpGatherBytes.
func moeAllToAllBytes(m model.Model, cfg parallel.Config) (perGPU float64) {
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	r := memory.MoERanksOf(cfg)
	local := s * b
	if r.SP {
		local /= r.TP
	}
	return local * float64(m.MoETopK()) * float64(m.Hidden) * gpu.BytesPerElem
}

// etpGatherBytes is the gathered buffer of the ETP all-gather after the
// dispatch: all R routed tokens x h x 2 bytes.
func etpGatherBytes(m model.Model, cfg parallel.Config) float64 {
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	return memory.RoutedTokens(m, cfg, s*b) / math.Max(m.CapacityFactorOr1(), 1e-9) * float64(m.Hidden) * gpu.BytesPerElem
}

// moeForwardFLOPs is an MoE layer's forward model FLOPs: attention, the
// router, the shared experts and TopK routed experts per token (dropped
// tokens and capacity padding not counted).
func (s layerShape) moeForwardFLOPs(m model.Model) float64 {
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

func moeLayerCompute(m model.Model, cfg parallel.Config, f parallel.Framework, g gpu.Spec) moeCompute {
	s := newLayerShape(m, cfg)
	cv := gpu.CurveOf(g)
	r := memory.MoERanksOf(cfg)
	attn := s.attnSeconds(g, cv)
	shared := s.mlpSeconds(g, cv, float64(m.SharedFFN))
	local := s.tokens
	if s.sp {
		local /= s.tp
	}
	router := gpu.CurveGEMMSeconds(g, cv, gpu.PrecisionBF16, local, float64(m.NumExperts), s.hidden) +
		3*4*local*float64(m.NumExperts)/gpu.HBMBytesPerS(g) // fp32 logits: softmax, top-k
	routed := memory.RoutedTokens(m, cfg, s.tokens) / m.CapacityFactorOr1()
	nLocal := float64(m.NumExperts) / r.EP
	perExpert := routed / nLocal
	fe := float64(m.ExpertFFN())
	one := s.linearSeconds(g, cv, gemmShape{perExpert, s.upCols(fe) / r.ETP, s.hidden}) + s.linearSeconds(g, cv, gemmShape{perExpert, s.hidden, fe / r.ETP})
	experts := nLocal*one - (nLocal-1)*2*gpu.GEMMLaunchS
	// permute + unpermute each read and write the routed tokens; the
	// activation function runs over their FFN columns.
	traffic := 2*2*routed*s.hidden*gpu.BytesPerElem + cv.ElemScale*gpu.BytesPerElem*elemwiseFFNElems*routed*fe/r.ETP
	fwd := s.attnGemmSeconds(g, cv) + attn + s.elemwiseSecondsFFN(g, cv, float64(m.SharedFFN)) + shared + router +
		experts + traffic/gpu.HBMBytesPerS(g)
	if f == parallel.FrameworkDeepSpeed {
		fwd += deepSpeedDispatchSeconds(g, cv, s.prec, s.tokens, deepSpeedSlots(m, cfg), s.hidden)
	}
	return moeCompute{computeCost: withBackward(fwd, attn, cfg.Recompute)}
}

// deepSpeedDispatchSeconds is DeepSpeed's dense dispatch and combine
// (moe/sharded_moe.py MOELayer.forward): einsum("sec,sm->ecm") scatters
// the s local tokens into the experts' capacity slots (e x c = the routed
// token slots, capacity padding included) and einsum("sec,ecm->sm")
// gathers them back, each a GEMM of 2 x s x (e x c) x h FLOPs in the
// training precision, where Megatron-Core permutes by index.
func deepSpeedDispatchSeconds(g gpu.Spec, cv gpu.Curve, p gpu.Precision, local, slots, h float64) float64 {
	return gpu.CurveGEMMSeconds(g, cv, p, slots, h, local) + gpu.CurveGEMMSeconds(g, cv, p, local, h, slots)
}

// deepSpeedSlots is the capacity slots (e x c) of DeepSpeed's dispatch
// buffer for one micro-batch, before drop_tokens splits them over TP: the
// routed tokens of every TP rank together.
func deepSpeedSlots(m model.Model, cfg parallel.Config) float64 {
	s, b := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch)
	slots := memory.RoutedTokens(m, cfg, s*b)
	if cfg.DropTokensTP {
		slots *= float64(max(cfg.TP, 1))
	}
	return slots
}

// AllToAllSeconds prices one all-to-all in which a GPU sends intraBytes to
// members on its own host and interBytes to members on other hosts: the
// two run at once (NVLink and NIC), each at its link's rate, plus one
// latency of the slower path (NCCL issues every send together).
func AllToAllSeconds(intraBytes, interBytes float64, intra, inter cluster.Link) float64 {
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
func epGroupBlocks(cfg parallel.Config) int {
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
	if e.cfg.DropTokensTP {
		// gather_tokens: one all-gather of the expert output over TP
		// forward; backward drop_tokens' all-gather of its gradient.
		one += AllGatherSeconds(deepSpeedSlots(e.m, e.cfg)*float64(e.m.Hidden)*gpu.ElemBytes(e.cfg.Precision), e.cfg.TP, intra)
	}
	fwd, bwd = one, one
	if e.cfg.Recompute == parallel.RecomputeFull {
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
		inter := cluster.Link{BytesPerS: math.Inf(1)}
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
func moeGradParams(m model.Model, cfg parallel.Config, r int) float64 {
	p := memory.StageParameters(m, cfg, r)
	pe := memory.StageExpertParams(m, cfg, r)
	n, edp := float64(cfg.DP*cfg.CP), float64(cfg.ExpertDP())
	if n <= 1 {
		return p
	}
	return p - pe + pe*((edp-1)/edp)/((n-1)/n)
}

// moeOwnedParams is the parameters whose optimizer step rank r's GPU runs:
// with the distributed optimizer (DeepSpeed: ZeRO >= 1) dense ones sharded
// over DP x CP, expert ones over expert-DP.
func moeOwnedParams(m model.Model, cfg parallel.Config, f parallel.Framework, r int) float64 {
	p := memory.StageParameters(m, cfg, r)
	if !cfg.DistributedOptimizer && (f != parallel.FrameworkDeepSpeed || cfg.ZeroStage < 1) {
		return p
	}
	pe := memory.StageExpertParams(m, cfg, r)
	return (p-pe)/float64(max(cfg.DP*cfg.CP, 1)) + pe/float64(cfg.ExpertDP())
}
