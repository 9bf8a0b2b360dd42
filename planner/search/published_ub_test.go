package search

import "github.com/pipette-launch/pipette-launch/planner/parallel"

// tpOverlapCfgHeader starts a header line naming the userbuffers
// configuration some rows of a --tp-comm-overlap table ran with:
// "# tp-comm-overlap-cfg: NAME ROW[,ROW...]", NAME a key of
// publishedTPOverlapCfgs. Rows no such line names run TE's defaults.
const tpOverlapCfgHeader = "# tp-comm-overlap-cfg:"

// publishedTPOverlapCfgs are the userbuffers configurations of the
// published runs, copied field by field from their sources.
//
// Megatron-Bridge's H100 FP8 Llama 3 configurations: NVIDIA-NeMo/
// Megatron-Bridge src/megatron/bridge/training/comm_overlap.py at commit
// df0289c180dd20ff26933455c7a0a11084f6a36f (the commit of the performance
// summary bridge_h100_fp8.tsv copies), the configurations that
// scripts/performance/configs/llama/llama3_llm_pretrain.py
// (llama3_70b_pretrain_config_h100) and llama31_llm_pretrain.py
// (llama31_405b_pretrain_config_h100) at that commit set for FP8. The
// dataclasses' defaults fill what a line omits: RingExchangeOverlapCfg
// num_sm 1, set_sm_margin False. (Their fp8_buf does not matter: TE puts
// every all-gather in an FP8 buffer in FP8 training.)
var publishedTPOverlapCfgs = map[string]parallel.TPOverlapCfg{
	"userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192":      bridgeFP8H100(4, 24, 2, 4),
	"userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192": bridgeFP8H100(2, 24, 2, 2),
}

// bridgeFP8H100 is the shape both Bridge FP8 H100 configurations share:
// bulk dgrad/wgrad overlaps on the given SMs without margin, ring exchange
// for the rest (proj_fprop and fc2_fprop: num_sm 1 with the SM margin).
func bridgeFP8H100(qkvDgrad, qkvWgrad, fc1Dgrad, fc1Wgrad int) parallel.TPOverlapCfg {
	bulk := func(sm int) parallel.TPOverlapGEMM {
		return parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk, NumSM: sm}
	}
	ring := parallel.TPOverlapGEMM{Method: parallel.TPOverlapRingExchange, NumSM: 1}
	rs := ring
	rs.SetSMMargin = true
	return parallel.TPOverlapCfg{
		QKVDgrad: bulk(qkvDgrad), QKVWgrad: bulk(qkvWgrad),
		FC1Dgrad: bulk(fc1Dgrad), FC1Wgrad: bulk(fc1Wgrad),
		QKVFprop: ring, ProjDgrad: ring, FC1Fprop: ring, FC2Dgrad: ring,
		ProjFprop: rs, FC2Fprop: rs,
	}
}
