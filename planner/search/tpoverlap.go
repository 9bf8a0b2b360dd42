package search

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// tpOverlapPair is one GEMM of a layer and the TP collective Transformer
// Engine's userbuffers run beside it (--tp-comm-overlap).
type tpOverlapPair struct {
	gemm   gemmShape // m: the gathered tokens
	ub     parallel.TPOverlapGEMM
	gather bool // all-gather (else reduce-scatter)
	// uncounted: the collective is one tpCommPerLayer does not count
	// without the flag either (the inputs gathered again for the wgrads,
	// which Megatron overlaps with the dgrad GEMMs on its own): only the
	// GEMM's slow-down is priced.
	uncounted bool
}

// seconds is the pair's time: the longer of the collective and the GEMM
// as userbuffers run it. With set_sm_margin the GEMM gets the SMs the
// communication kernel leaves (TE's _math_sms = SMs - num_sm: time x
// SMs / (SMs - num_sm)); without it, every SM. Each split beyond the
// first is one more GEMM kernel (GEMMLaunchS): ring exchange runs TP
// chunks, a pipeline num_splits, bulk one. Returns the pair's time and
// the GEMM's own (what the layer's compute already counts).
func (p tpOverlapPair) seconds(s layerShape, g gpu.Spec, cv gpu.Curve, link cluster.Link, tp int) (pair, gemm float64) {
	gemm = s.linearSeconds(g, cv, p.gemm)
	run := gemm
	if p.ub.SetSMMargin && g.SMs > p.ub.NumSM && p.ub.NumSM > 0 {
		run *= float64(g.SMs) / float64(g.SMs-p.ub.NumSM)
	}
	splits := 1
	switch p.ub.Method {
	case parallel.TPOverlapRingExchange:
		splits = tp
	case parallel.TPOverlapPipeline:
		splits = max(p.ub.NumSplits, 1)
	}
	run += float64(splits-1) * gpu.GEMMLaunchS
	elem := s.elem()
	if p.gather && s.prec == gpu.PrecisionFP8 {
		// TE (since v2.8) gathers into an FP8 buffer in FP8 training,
		// whatever the configuration's fp8_buf says (initialize_ub).
		elem = 1
	}
	comm := AllGatherSeconds(s.tokens*s.hidden*elem, tp, link)
	if p.uncounted {
		comm = 0
	}
	return max(comm, run), gemm
}

// tpCommOverlapped is what --tp-comm-overlap adds to one layer's forward
// and backward (one micro-batch) beyond its GEMMs, in place of the TP
// communication tpCommPerLayer prices without it. Each all-gather and
// reduce-scatter runs beside its own GEMM (ub's ten GEMM names), so what
// shows is per pair: max(collective, GEMM as run) - GEMM. Forward: the QKV
// and FC1 inputs gathered, the projection and FC2 outputs reduce-scattered;
// backward: the output gradients gathered for the projection and FC2
// dgrads, the QKV and FC1 inputs gathered again for their wgrads (bulk,
// beside the dgrads), and the QKV and FC1 dgrads reduce-scattered (bulk,
// beside the wgrads). The re-gathered inputs are not counted, as
// tpCommPerLayer does not count them (Megatron gathers them beside the
// dgrads without userbuffers too), so overlap never exposes more than the
// flag-less pricing; their GEMMs' SM margin is. A dgrad or wgrad GEMM has
// the forward GEMM's FLOPs. Full recompute runs the forward pairs again in
// backward.
func tpCommOverlapped(s layerShape, cfg parallel.Config, g gpu.Spec, cv gpu.Curve, link cluster.Link) (fwd, bwd float64) {
	if cfg.TP <= 1 {
		return 0, 0
	}
	ub := cfg.TPOverlap()
	qkv, proj, fc1, fc2 := s.linearGEMMs(s.ffn)
	pair := func(shape gemmShape, u parallel.TPOverlapGEMM, gather bool) tpOverlapPair {
		return tpOverlapPair{gemm: shape, ub: u, gather: gather}
	}
	regather := func(shape gemmShape, u parallel.TPOverlapGEMM) tpOverlapPair {
		p := pair(shape, u, true)
		p.uncounted = true
		return p
	}
	forward := []tpOverlapPair{
		pair(qkv, ub.QKVFprop, true), pair(proj, ub.ProjFprop, false),
		pair(fc1, ub.FC1Fprop, true), pair(fc2, ub.FC2Fprop, false),
	}
	backward := []tpOverlapPair{
		pair(proj, ub.ProjDgrad, true), pair(fc2, ub.FC2Dgrad, true),
		regather(qkv, ub.QKVDgrad), pair(qkv, ub.QKVWgrad, false),
		regather(fc1, ub.FC1Dgrad), pair(fc1, ub.FC1Wgrad, false),
	}
	extra := func(ps []tpOverlapPair) float64 {
		var t float64
		for _, p := range ps {
			all, gemm := p.seconds(s, g, cv, link, cfg.TP)
			t += all - gemm
		}
		return t
	}
	fwd, bwd = extra(forward), extra(backward)
	if cfg.Recompute == parallel.RecomputeFull {
		bwd += fwd
	}
	return fwd, bwd
}
