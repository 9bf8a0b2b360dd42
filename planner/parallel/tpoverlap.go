package parallel

// TPOverlapMethod is how Transformer Engine's userbuffers overlap one
// GEMM with its TP collective (the "method" of a ub_cfgs entry).
type TPOverlapMethod string

const (
	// TPOverlapRingExchange passes chunks around the TP ring by
	// point-to-point copies (copy engines), one GEMM per chunk: TP chunks.
	TPOverlapRingExchange TPOverlapMethod = "ring_exchange"
	// TPOverlapPipeline splits a GEMM into NumSplits chunks whose outputs
	// a reduce-scatter kernel on NumSM SMs reduces as they finish.
	TPOverlapPipeline TPOverlapMethod = "pipeline"
	// TPOverlapBulk runs one whole collective (a kernel on NumSM SMs)
	// beside one whole GEMM that does not depend on it.
	TPOverlapBulk TPOverlapMethod = "bulk"
)

// TPOverlapGEMM is one GEMM's userbuffers setting, as Transformer
// Engine's initialize_ub takes it (ub_cfgs[name]).
type TPOverlapGEMM struct {
	Method TPOverlapMethod `json:"method"`
	// NumSM is the SMs the communication kernel runs on; with SetSMMargin
	// the GEMM is launched on the others (TE's _math_sms = SMs - num_sm),
	// without it on every SM.
	NumSM       int  `json:"num_sm"`
	SetSMMargin bool `json:"set_sm_margin"`
	// NumSplits is a pipeline's chunk count (ring exchange always splits
	// into TP chunks).
	NumSplits int `json:"num_splits,omitempty"`
}

// TPOverlapCfg is a decoder layer's userbuffers configuration: the GEMMs
// Transformer Engine names in ub_cfgs, each with the collective it
// overlaps (sequence parallelism, TP > 1):
//
//	qkv_fprop   all-gather of the QKV input        ring exchange by default
//	proj_fprop  reduce-scatter of the projection   pipeline
//	fc1_fprop   all-gather of the FC1 input        ring exchange
//	fc2_fprop   reduce-scatter of FC2's output     pipeline
//	proj_dgrad  all-gather of the output gradient  ring exchange
//	fc2_dgrad   all-gather of the output gradient  ring exchange
//	qkv_dgrad   all-gather of the QKV input, for its wgrad  bulk
//	qkv_wgrad   reduce-scatter of QKV's dgrad      bulk
//	fc1_dgrad   all-gather of the FC1 input, for its wgrad  bulk
//	fc1_wgrad   reduce-scatter of FC1's dgrad      bulk
type TPOverlapCfg struct {
	QKVFprop  TPOverlapGEMM `json:"qkv_fprop"`
	ProjFprop TPOverlapGEMM `json:"proj_fprop"`
	FC1Fprop  TPOverlapGEMM `json:"fc1_fprop"`
	FC2Fprop  TPOverlapGEMM `json:"fc2_fprop"`
	ProjDgrad TPOverlapGEMM `json:"proj_dgrad"`
	FC2Dgrad  TPOverlapGEMM `json:"fc2_dgrad"`
	QKVDgrad  TPOverlapGEMM `json:"qkv_dgrad"`
	QKVWgrad  TPOverlapGEMM `json:"qkv_wgrad"`
	FC1Dgrad  TPOverlapGEMM `json:"fc1_dgrad"`
	FC1Wgrad  TPOverlapGEMM `json:"fc1_wgrad"`
}

// DefaultTPOverlap is what Megatron-LM's --tp-comm-overlap runs without
// --tp-comm-overlap-cfg: Transformer Engine's initialize_ub defaults
// (transformer_engine/pytorch/module/base.py, get_default_config, at
// NVIDIA/TransformerEngine v2.18, commit 27486e03, the same at v2.4):
// ring exchange on 1 SM without margin and TP splits; pipeline and bulk on
// 16 SMs with the SM margin, pipeline in 4 splits. (fp8_buf is not a
// setting here: TE gives every all-gather an FP8 buffer in FP8 training,
// whatever a user configuration says, since v2.8.)
func DefaultTPOverlap() TPOverlapCfg {
	ring := TPOverlapGEMM{Method: TPOverlapRingExchange, NumSM: 1}
	pipe := TPOverlapGEMM{Method: TPOverlapPipeline, NumSM: 16, SetSMMargin: true, NumSplits: 4}
	bulk := TPOverlapGEMM{Method: TPOverlapBulk, NumSM: 16, SetSMMargin: true}
	return TPOverlapCfg{
		QKVFprop: ring, FC1Fprop: ring, ProjDgrad: ring, FC2Dgrad: ring,
		ProjFprop: pipe, FC2Fprop: pipe,
		QKVDgrad: bulk, FC1Dgrad: bulk, QKVWgrad: bulk, FC1Wgrad: bulk,
	}
}
