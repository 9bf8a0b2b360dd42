package memory

import (
	"math"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Memory model (per GPU, bytes). Mixed precision with Adam throughout.
//
// Model states per parameter held by a GPU (P = its TP/PP shard):
//   - Megatron-LM: bf16 weights 2 + fp32 main grads 4 + fp32 master weights
//     and Adam m, v 12 = 18 B; the distributed optimizer shards the 12 over
//     the data-parallel (x context-parallel) group: 6 + 12/dp
//     (megatron/training/theoretical_memory_usage.py).
//   - DeepSpeed ZeRO (Rajbhandari et al. 2020, sec. 5 with K = 12; DeepSpeed
//     keeps 16-bit grads): stage 0: 2+2+12; 1: 2+2+12/dp; 2: 2+(2+12)/dp;
//     3: (2+2+12)/dp plus a working set of 4 B x the largest layer (the
//     gathered 16-bit params and grads of the layer being computed; the "L"
//     of DeepSpeed's estimate_zero3_model_states_mem_needs).
//   - torch (DDP + autocast): fp32 weights 4 + fp32 grads 4 + Adam 8 = 16 B.
//
// DeepSpeed's estimate_zero2_model_states_mem_needs uses 2P + 18P/G for
// ZeRO-2 without offload (v0.14.4): it also counts the fp32 gradient
// partition built for the optimizer step. That step runs
// after backward has freed the activations, so it does not raise the peak
// this estimator computes; the offload cases agree exactly (see tests).
//
// Activations follow Korthikanti et al. 2022 (arXiv 2205.05198, Table 2),
// generalised; see layerActivationBytes. The paper's unfused attention
// stores the score matrices (softmax output, dropout mask and output:
// 5*a*s^2*b bytes per layer) unless selective recompute is on. Flash/fused
// attention, the default of current Megatron-LM (Transformer Engine) and
// DeepSpeed runs, never stores them: it keeps only its output, which the
// 10+24/t terms already count. So the score term applies only to models with
// MaterializedAttention; otherwise "none" and "selective" store the same and
// selective only adds recompute time.

// Allowances the formulas above do not cover, taken as GPU "Other":
// otherFixedBytes is the device memory a training process uses beyond the
// tensors it allocates: the CUDA context, cuBLAS/cuDNN workspaces, NCCL's
// buffers for every communicator, and what PyTorch's caching allocator
// reserves but cannot reuse. It is measured, not guessed: Sailor's 26
// GH200 runs (eth-easl/sailor cf2c8e3, validation/clariden/*/*.json
// max_mem, the device memory in use at the peak; TP4 with PP and DP
// groups, fp32, DeepSpeed's pipeline engine) exceed this estimator's
// weights, gradients, optimizer states and activations by 3.4-5.9 GiB on
// 24 runs (median 4.0 GiB; one run measures 4.3 GiB under the estimate and
// one 2.0 GiB over, both beside runs of the same layout that agree), and
// the excess does not grow with the allocation (the earlier 5% share for
// fragmentation is not seen). TestMemoryValidation prints the fit; docs/cost-model.md
// keeps the derivation. Its parts, measured on one H200
// (testdata/gpu_overhead_h200.jsonl, TestGPUOverheadParts): the CUDA
// context and libraries 0.74 GiB, a one-rank NCCL communicator 0.55 GiB
// and 0.38 GiB for each more, and the caching allocator's slack, 0.4-3.9
// GiB on single-GPU training runs, which there did grow with the
// activations (1.9-11.6% of the peak; Sailor's runs show no such share).
// The search's --memory-headroom is kept on top for what varies between
// runs and systems.
const (
	otherFixedBytes = 4 * gpu.GiB
	// DeepSpeedBucketElements is the reduce_bucket_size and
	// allgather_bucket_size the renderer sets for ZeRO-1/2; two 16-bit
	// buckets of this many elements are counted as GPU "Other".
	DeepSpeedBucketElements = 2e8
	// Host-side allowances per rank: a CUDA/PyTorch training process with
	// its data-loader workers holds a few GiB of host memory; offload adds
	// pinned staging buffers (DeepSpeed buffer_count x buffer_size, Megatron
	// d2h/h2d buffers).
	hostProcessBytes      = 3 * gpu.GiB
	hostPinnedBufferBytes = 1 * gpu.GiB
	// cpuGradBytes is the fp32 gradient copy the CPU optimizer steps from.
	cpuGradBytes = 4
)

// WithStages normalises cfg and fixes its stage layers once, so the
// per-rank helpers do not rebuild an even split on every call.
func WithStages(m model.Model, cfg parallel.Config) parallel.Config {
	cfg = Normalized(cfg)
	cfg.StageLayers = StageLayersOf(m, cfg)
	return cfg
}

// Normalized fills zero sizes with 1 so callers may leave them unset.
func Normalized(cfg parallel.Config) parallel.Config {
	for _, p := range []*int{&cfg.TP, &cfg.PP, &cfg.DP, &cfg.CP, &cfg.VPP, &cfg.MicroBatch} {
		if *p < 1 {
			*p = 1
		}
	}
	if cfg.Recompute == "" {
		cfg.Recompute = parallel.RecomputeNone
	}
	return cfg
}

// StageLayersOf returns cfg.StageLayers, or an even split of the model's
// layers over PP*VPP stages (earlier stages take the remainder) when it is
// unset or has the wrong length.
func StageLayersOf(m model.Model, cfg parallel.Config) []int {
	cfg = Normalized(cfg)
	n := cfg.PP * cfg.VPP
	if len(cfg.StageLayers) == n {
		return cfg.StageLayers
	}
	out := make([]int, n)
	for i := range out {
		out[i] = m.NumLayers / n
		if i < m.NumLayers%n {
			out[i]++
		}
	}
	return out
}

// rankLayers is the decoder layers pipeline rank r holds over all its
// virtual stages (stage i = vpp_index*PP + pp_rank).
func rankLayers(m model.Model, cfg parallel.Config, r int) int {
	layers := StageLayersOf(m, cfg)
	n := 0
	for v := range cfg.VPP {
		n += layers[v*cfg.PP+r]
	}
	return n
}

// LayerParamsPerGPU is one decoder layer's parameters on one TP rank. K/V
// projections split over min(TP, groups): with more TP ranks than KV
// groups Megatron replicates the groups. Norm weights are replicated.
func LayerParamsPerGPU(m model.Model, tp int) float64 {
	return attentionParamsPerGPU(m, tp) + float64(m.MLPMats())*float64(m.Hidden)*float64(m.FFN())/float64(tp)
}

// attentionParamsPerGPU is a layer's attention (Q and output projections
// split over TP, K/V as above) and its two norms on one TP rank.
func attentionParamsPerGPU(m model.Model, tp int) float64 {
	h, t := float64(m.Hidden), float64(tp)
	kvDim := float64(m.HeadDim()) * float64(m.Groups())
	kv := 2 * h * kvDim / math.Min(t, float64(m.Groups()))
	return 2*h*float64(m.QueryDim())/t + kv + 2*h
}

// embeddingParamsPerGPU is the (padded) vocabulary matrix on one TP rank.
func embeddingParamsPerGPU(m model.Model, tp int) float64 {
	return float64(m.PaddedVocab(tp)) * float64(m.Hidden) / float64(tp)
}

// StageParameters is the parameter count one GPU of pipeline rank ppRank
// holds: its layers, the input embedding on the first rank, and on the
// last rank the final norm plus the output layer (untied) or, with PP > 1,
// the copy of the tied embedding Megatron keeps there for the output.
func StageParameters(m model.Model, cfg parallel.Config, ppRank int) float64 {
	cfg = Normalized(cfg)
	dense, moe := rankLayerKinds(m, cfg, ppRank)
	p := float64(dense) * LayerParamsPerGPU(m, cfg.TP)
	if moe > 0 {
		p += float64(moe) * (moeLayerDenseParamsPerGPU(m, cfg.TP) + expertParamsPerGPU(m, cfg))
	}
	emb := embeddingParamsPerGPU(m, cfg.TP)
	if ppRank == 0 {
		p += emb
	}
	if ppRank == cfg.PP-1 {
		p += float64(m.Hidden)
		if m.UntieEmbeddings || cfg.PP > 1 {
			p += emb
		}
	}
	return p
}

// largestLayerPerGPU is the biggest unit ZeRO-3 gathers at once.
func largestLayerPerGPU(m model.Model, tp int) float64 {
	return math.Max(LayerParamsPerGPU(m, tp), embeddingParamsPerGPU(m, tp))
}

// modelStates is the per-GPU model-state memory and what is offloaded.
type modelStates struct {
	weights, grads, optimizer float64
	// host is the offloaded part kept in host memory for this rank.
	host float64
}

// optimizerShards is the group the distributed optimizer / ZeRO shards
// over: data parallel times context parallel (Megatron folds CP ranks into
// the gradient-reduction group).
func optimizerShards(cfg parallel.Config) float64 { return float64(cfg.DP * cfg.CP) }

func computeModelStates(m model.Model, cfg parallel.Config, f parallel.Framework, ppRank int) modelStates {
	p := StageParameters(m, cfg, ppRank)
	var s modelStates
	switch f {
	case parallel.FrameworkDeepSpeed:
		s = deepSpeedExpertStates(m, cfg, p, StageExpertParams(m, cfg, ppRank))
	case parallel.FrameworkTorch:
		s = modelStates{weights: 4 * p, grads: 4 * p, optimizer: 8 * p}
	default:
		s = megatronStates(cfg, p, StageExpertParams(m, cfg, ppRank))
	}
	s.weights += fp8WeightCopyBytes(m, cfg, ppRank)
	return s
}

// fp8WeightCopyBytes: with FP8, Transformer Engine keeps, next to the bf16
// weights, an FP8 copy of every decoder-layer GEMM weight and its transpose
// (1 byte each: the forward uses one, the backward's dgrad the other),
// cached across the micro-batches of a step. Norms, embedding and output
// layer stay in 16-bit and have none.
//
// With --fp8-param-gather the FP8 weights are the model's parameters: no
// bf16 copy is kept beside them, so the 2 B the weights are counted at are
// the FP8 weight and its transpose, and nothing is added.
func fp8WeightCopyBytes(m model.Model, cfg parallel.Config, ppRank int) float64 {
	if cfg.Precision != gpu.PrecisionFP8 || cfg.FP8ParamGather {
		return 0
	}
	cfg = Normalized(cfg)
	h := float64(m.Hidden)
	dense, moe := rankLayerKinds(m, cfg, ppRank)
	gemm := float64(dense) * (LayerParamsPerGPU(m, cfg.TP) - 2*h)
	if moe > 0 {
		gemm += float64(moe) * (moeLayerDenseParamsPerGPU(m, cfg.TP) - 2*h + expertParamsPerGPU(m, cfg))
	}
	return 2 * gemm
}

// megatronStates prices p parameters per GPU, pe of them routed-expert
// parameters whose optimizer states the distributed optimizer shards over
// expert-DP instead of DP x CP.
func megatronStates(cfg parallel.Config, p, pe float64) modelStates {
	shards, eshards := 1.0, 1.0
	if cfg.DistributedOptimizer {
		shards = optimizerShards(cfg)
		eshards = float64(cfg.ExpertDP())
	}
	frac := clamp01(cfg.Offload.OptimizerFraction)
	// Adam's master weights and moments (parallel.Config.MegatronOptimizerBytes).
	optB, weightB := cfg.MegatronOptimizerBytes(), 2.0
	if cfg.Precision == gpu.PrecisionFP32 {
		weightB = 4
	}
	opt := optB*(p-pe)/shards + optB*pe/eshards
	return modelStates{
		weights:   weightB * p,
		grads:     cfg.MegatronGradBytes() * p,
		optimizer: opt * (1 - frac),
		host:      (opt + cpuGradBytes*((p-pe)/shards+pe/eshards)) * frac,
	}
}

func deepSpeedStates(m model.Model, cfg parallel.Config, p float64) modelStates {
	return deepSpeedExpertStates(m, cfg, p, 0)
}

// deepSpeedExpertStates prices p parameters per GPU, pe of them MoE
// experts: ZeRO-1/2 partition the experts' optimizer states (and ZeRO-2
// their gradients) over the expert-data-parallel group, not DP
// (stage_1_and_2.py takes the MoE parameter groups' real_dp_process_group
// from groups._get_expert_data_parallel_group). ZeRO-3 has no MoE.
func deepSpeedExpertStates(m model.Model, cfg parallel.Config, p, pe float64) modelStates {
	n := optimizerShards(cfg)
	z := cfg.ZeroStage
	optShards, gradShards, weightShards := 1.0, 1.0, 1.0
	if z >= 1 {
		optShards = n
		if pe > 0 {
			// The shard of p the states are counted on: (p-pe)/n + pe/edp.
			optShards = p / ((p-pe)/n + pe/float64(cfg.ExpertDP()))
		}
	}
	if z >= 2 {
		gradShards = optShards
	}
	if z >= 3 {
		weightShards = n
	}
	frac := clamp01(cfg.Offload.OptimizerFraction)
	// fp32 (no fp16/bf16 section in ds_config): 4 B weights and gradients,
	// and the optimizer holds only Adam's moments (8 B), the weights being
	// the master copy.
	wB, optB := 2.0, 12.0
	if cfg.Precision == gpu.PrecisionFP32 {
		wB, optB = 4, 8
	}
	s := modelStates{
		weights:   wB * p / weightShards,
		grads:     wB * p / gradShards,
		optimizer: optB * p / optShards * (1 - frac),
		host:      (optB + cpuGradBytes) * p / optShards * frac,
	}
	if z >= 2 {
		// ZeRO-Offload streams the reduced gradient partition to host memory.
		s.grads *= 1 - frac
	}
	if z >= 3 {
		if cfg.Offload.Params {
			s.host += s.weights
			s.weights = 0
		}
		s.weights += 4 * largestLayerPerGPU(m, cfg.TP)
	}
	return s
}

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// layerActivationBytes is one micro-batch's stored activations of one
// decoder layer on one GPU: what autograd keeps for backward, as measured
// on Megatron-Core's local GPT layer (testdata/saved_tensors.py, checked
// against every point of its grid by TestLayerActivationsMatchSavedTensors).
// It generalises Korthikanti et al. 2022 (arXiv 2205.05198, Table 2), whose
// 34*s*b*h + 5*a*s^2*b is the case e = 2, dropout on, MHA, GeLU, f = 4h.
// Per token, e the element size (2; 4 in fp32), on one TP rank:
//
//   - replicated over TP, split with sequence parallelism: the two norm
//     inputs and the two norm outputs the QKV and FC1 linears keep (4e*h),
//     and with hidden dropout its two 1-byte masks (2h);
//   - split over TP: the attention's inputs (attentionInputBytes), its
//     output the projection keeps (e*q), and the MLP: GeLU keeps FC1's
//     output and FC2's input (2e*f), fused SwiGLU FC1's 2f-wide output and
//     FC2's input (3e*f);
//   - unfused attention with nothing recomputed: the scores, a*s per token
//     (split over TP), e bytes each for the softmax output, plus with
//     attention dropout its 1-byte mask and e-byte output.
//
// Full recompute keeps only the layer input, e*s*b*h (split by TP with
// SP). Context parallelism divides the sequence.
func layerActivationBytes(m model.Model, cfg parallel.Config) float64 {
	return storedLayerBytes(m, cfg, fullLayerActivationBytes)
}

// activationElemBytes is the size of one stored activation element: 4 B
// in fp32, else 2 (bf16 and fp16; FP8 runs keep 16-bit activations except
// the linears' inputs, see linearInputBytes).
func activationElemBytes(cfg parallel.Config) float64 {
	if cfg.Precision == gpu.PrecisionFP32 {
		return 4
	}
	return 2
}

// linearInputBytes is the size of one element of what a linear layer
// keeps of its input for the weight gradient: the activation size, or 1 B
// in FP8, where Transformer Engine's linears keep the FP8-quantized input
// (Megatron-LM core_v0.19.0, 5be9626709af2722333bf54797c954c09edeada3,
// megatron/core/extensions/transformer_engine.py, set_save_original_input:
// "Some transformer-engine modules would save the quantized tensors by
// default in fp8 training"). The fused layer norm + linear of QKV and FC1
// keeps the norm's 16-bit input beside it. The output projection keeps an
// FP8 copy of the attention output besides the bf16 output the fused
// attention keeps (megatron/core/transformer/attention.py: Megatron turns
// that copy off only for TE >= 2.6 with a recipe other than delayed
// scaling, the one --fp8-format hybrid with an amax history runs).
// Transformer Engine's source bears this out (NVIDIA/TransformerEngine
// v2.8, 40c69e75, and v1.9, e79d915a): te.Linear keeps only the FP8
// quantized input (module/linear.py: update_usage(rowwise_usage=False,
// columnwise_usage=True) before save; save_original_input is refused
// under delayed scaling), te.LayerNormLinear keeps the norm's 16-bit
// input and its FP8 output (module/layernorm_linear.py), and fused
// attention keeps Q, K, V and its 16-bit output. Left out, as small: the
// norms' fp32 rsigma (4 B a token each) and attention's fp32 softmax
// statistics (4 B a token per head). A te.LayerNormMLP, which Megatron's
// default layer spec does not use, would keep its norm output with the
// FP8 transpose (2 B) under TE 2.x.
func linearInputBytes(cfg parallel.Config) float64 {
	if cfg.Precision == gpu.PrecisionFP8 {
		return 1
	}
	return activationElemBytes(cfg)
}

// unfusedAttention reports whether attention materializes its scores:
// the model says so (Megatron's unfused/local backend), or the run is
// fp32, which no flash or fused kernel takes.
func unfusedAttention(m model.Model, cfg parallel.Config) bool {
	return m.MaterializedAttention || cfg.Precision == gpu.PrecisionFP32
}

// storedLayerBytes is what a layer keeps for one micro-batch given full,
// its everything-stored formula: only the layer input under full
// recompute, else full without the attention scores unless nothing is
// recomputed and attention is unfused.
func storedLayerBytes(m model.Model, cfg parallel.Config, full func(m model.Model, cfg parallel.Config, s, b, h, t float64, sp, scores bool) float64) float64 {
	s, b, h := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(m.Hidden)
	t := float64(cfg.TP)
	sp := cfg.SequenceParallel && cfg.TP > 1
	if cfg.Recompute == parallel.RecomputeFull {
		v := activationElemBytes(cfg) * s * b * h
		if sp {
			v /= t
		}
		return v
	}
	return full(m, cfg, s, b, h, t, sp, cfg.Recompute == parallel.RecomputeNone && unfusedAttention(m, cfg))
}

func fullLayerActivationBytes(m model.Model, cfg parallel.Config, s, b, h, t float64, sp, scores bool) float64 {
	return layerBytesWithFFN(m, cfg, s, b, h, t, sp, scores, float64(m.FFN()))
}

// layerBytesWithFFN is fullLayerActivationBytes for an MLP of ffn columns
// (0: none); scores is whether the unfused attention's score matrices are
// kept (nothing recomputed).
func layerBytesWithFFN(m model.Model, cfg parallel.Config, s, b, h, t float64, sp, scores bool, ffn float64) float64 {
	e, li := activationElemBytes(cfg), linearInputBytes(cfg)
	// The activation function keeps FC1's output (2f wide for SwiGLU),
	// FC2 its input.
	mlp := e*ffn + li*ffn
	if m.SwiGLU {
		mlp = 2*e*ffn + li*ffn
	}
	rep := 2*e*h + 2*li*h
	if m.HiddenDropoutP() > 0 {
		rep += 2 * h
	}
	if sp {
		rep /= t
	}
	q := float64(m.QueryDim())
	split := attentionInputBytes(m, e, t, b, scores) + e*q + mlp
	if cfg.Precision == gpu.PrecisionFP8 {
		split += q // the projection's FP8 copy of the attention output
	}
	v := s * b * (rep + split/t)
	if scores {
		v += scoreBytes(m, cfg, s, b, t)
	}
	return v
}

// attentionInputBytes is, per token and before the TP split, what the
// core attention's backward keeps of Q, K and V, from the way Megatron
// builds them. The QKV projection writes one mixed tensor; Q, K and V are
// views of it (Attention.get_query_key_value_tensors), except that with
// grouped-query attention and more than one KV group on the rank the
// query's reshape copies it (the rank's query heads are not evenly strided
// when its groups are interleaved with their K and V). Flash/fused
// attention and selective recompute's checkpoint keep these inputs as they
// come. Megatron's unfused DotProductAttention keeps what its matmuls use:
// the query, and with grouped-query attention K and V repeated to every
// head (repeat_interleave), new query-wide tensors; its [s, b*heads, d]
// reshape of a query still viewing the mixed tensor copies it too when
// b > 1.
func attentionInputBytes(m model.Model, e, t, b float64, scores bool) float64 {
	q, kv := float64(m.QueryDim()), float64(m.HeadDim()*m.Groups())
	grouped := m.Groups() < m.Heads
	queryCopy := grouped && float64(m.Groups()) > t
	mixed := e * (q + 2*kv)
	switch {
	case scores && grouped && (queryCopy || b > 1):
		return 3 * e * q // the query copy, K and V repeated
	case scores && grouped:
		return mixed + 2*e*q // the query's view keeps the mixed tensor
	case queryCopy:
		return mixed + e*q
	}
	return mixed
}

// scoreBytes is one layer's attention score matrices on one TP rank:
// a*s^2*b/t elements, each the e-byte softmax output and, with attention
// dropout, its 1-byte mask and e-byte output.
func scoreBytes(m model.Model, cfg parallel.Config, s, b, t float64) float64 {
	e := activationElemBytes(cfg)
	per := e
	if m.AttentionDropoutP() > 0 {
		per += 1 + e
	}
	return per * scoreElems(m, s, b, t)
}

// scoreElems is the elements of one layer's attention score matrix on one
// TP rank: a*s^2*b/t.
func scoreElems(m model.Model, s, b, t float64) float64 {
	return float64(m.Heads) * s * s * b / t
}

// recomputeWorkingSet is the transient memory of the one layer whose
// backward is running: selective recompute rebuilds that layer's attention
// scores (unfused attention only); full recompute rebuilds all of its
// activations, less the input it kept. Without recompute everything is
// already stored. Unfused attention's backward also makes scores-sized
// gradients; measured on an H200 (TestTensorsMatchGPUSteps) PyTorch's
// softmax path held three at the last layer's attention backward, which
// put two bf16 runs' peaks 2-3% above the estimate; Megatron's fused
// 16-bit softmax computes its gradient in place, and Sailor's fp32
// DeepSpeed runs at PP > 1 show none, so they are not added.
func recomputeWorkingSet(m model.Model, cfg parallel.Config) float64 {
	s, b, h := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(m.Hidden)
	t, sp := float64(cfg.TP), cfg.SequenceParallel && cfg.TP > 1
	unfused := unfusedAttention(m, cfg)
	switch cfg.Recompute {
	case parallel.RecomputeSelective:
		if !unfused {
			return 0 // flash attention's backward rebuilds scores tile by tile
		}
		return scoreBytes(m, cfg, s, b, t)
	case parallel.RecomputeFull:
		return fullLayerActivationBytes(m, cfg, s, b, h, t, sp, unfused) - layerActivationBytes(m, cfg)
	}
	return 0
}

// ScoreBufferBytes is, for unfused attention, Megatron's global memory
// buffer: the scores-sized tensor DotProductAttention hands torch.baddbmm
// as its (beta = 0) input, made by the first layer's forward and kept for
// the run (parallel_state.get_global_memory_buffer, "mpu"; Megatron-
// DeepSpeed's CoreAttention has the same). Measured on an H200: a GPT's
// device memory after its forward held it beside the stored activations
// (planner/memory/testdata/gpu_overhead_h200.jsonl, TestTensorsMatchGPUSteps).
func ScoreBufferBytes(m model.Model, cfg parallel.Config) float64 {
	if !unfusedAttention(m, cfg) {
		return 0
	}
	return activationElemBytes(cfg) * scoreElems(m, float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(cfg.TP))
}

// numMicroBatches is cfg.NumMicroBatches, else derived from the batch.
func numMicroBatches(cfg parallel.Config) int {
	if cfg.NumMicroBatches > 0 {
		return cfg.NumMicroBatches
	}
	if cfg.GlobalBatch > 0 {
		return max(1, cfg.GlobalBatch/(cfg.MicroBatch*cfg.DP))
	}
	return cfg.PP * cfg.VPP // enough to fill the pipeline
}

// layerMicroBatchesInFlight is how many (layer x micro-batch) activation
// sets pipeline rank r holds at its peak. 1F1B: rank r runs PP-r warm-up
// forwards before its first backward, each holding all its layers, capped
// by the micro-batch count. Interleaved (Megatron's schedule): rank r runs
// (PP-r-1)*2 + (VPP-1)*PP + 1 chunk-forwards first, each a 1/VPP share of
// its layers; on rank 0 that is Megatron's 1 + (p-1)/(p*v) factor.
func layerMicroBatchesInFlight(m model.Model, cfg parallel.Config, r int) float64 {
	layers := float64(rankLayers(m, cfg, r))
	mb := numMicroBatches(cfg)
	if cfg.VPP <= 1 {
		return layers * float64(min(cfg.PP-r, mb))
	}
	chunks := min((cfg.PP-r-1)*2+(cfg.VPP-1)*cfg.PP+1, mb*cfg.VPP)
	return float64(chunks) * layers / float64(cfg.VPP)
}

// embeddingActivationBytes is the first stage's input side per Megatron's
// theoretical_memory_usage: 8 B token ids per token and, with hidden
// dropout, the 1 B dropout mask of the embedding output, for every
// micro-batch in flight.
func embeddingActivationBytes(m model.Model, cfg parallel.Config) float64 {
	s, b, h := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(m.Hidden)
	inFlight := float64(min(cfg.PP, numMicroBatches(cfg)))
	if cfg.VPP > 1 {
		inFlight *= 1 + float64(cfg.PP-1)/float64(cfg.PP*cfg.VPP)
	}
	perToken := 8.0
	if m.HiddenDropoutP() > 0 {
		perToken += h
	}
	v := inFlight * s * b * perToken
	if cfg.SequenceParallel && cfg.TP > 1 {
		v /= float64(cfg.TP)
	}
	return v
}

// outputActivationBytes is the last stage's output layer for the one
// micro-batch whose loss is live: the final norm's input and output (2e*h
// per token; Megatron's theoretical_memory_usage counts the 4*s*b*h of
// 16-bit) and the fp32 softmax of the logits the vocab-parallel cross
// entropy keeps for backward, 4*s*b*V/t (megatron/core/tensor_parallel/
// cross_entropy.py, and the same exp_logits in fusions/fused_cross_entropy.py
// under --cross-entropy-loss-fusion). This is large: GPT-3 vocab at s=2048,
// b=1, TP=1 is 0.4 GB.
//
// In a 16-bit run the logits' 16-bit copy lives beside that fp32 softmax at
// the loss, on both passes: forward, the output layer's 16-bit logits are
// still held while the cross entropy makes its fp32 copy
// (VocabParallelCrossEntropy.calculate_logits_max: vocab_parallel_logits
// .float(), core_v0.19.0 tensor_parallel/cross_entropy.py); backward, the
// fp32 gradient it writes in place of the softmax is cast back to 16 bits
// (the .float()'s backward, or calculate_gradients' .to(torch.bfloat16) in
// fusions/fused_cross_entropy.py) before the softmax is freed. So the peak
// at the loss is (4+e)*s*b*V/t. fp32 runs have no copy (.float() returns
// the tensor itself). This is Megatron-LM's loss; a DeepSpeed or torch job
// brings its own (llm-foundry's runs, priced as ZeRO-3, use flash-attn's
// fused cross entropy, which computes its gradient in place of the 16-bit
// logits), so only f == Megatron gets the copy.
//
// A torch job's loss is torch.nn.functional.cross_entropy on fp32 logits
// (Hugging Face's causal-LM loss upcasts 16-bit logits first): at its
// backward the log-softmax output it keeps, nll_loss's dense gradient and
// the log-softmax's gradient are live together, three fp32 logits-sized
// tensors (measured on an H200 in bf16 with the upcast and in fp32:
// 3.0 x 4 B a logit beyond the stored activations, TestTensorsMatchGPUSteps).
func outputActivationBytes(m model.Model, cfg parallel.Config, f parallel.Framework) float64 {
	s, b, h := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(m.Hidden)
	e := activationElemBytes(cfg)
	perLogit := 4.0
	switch {
	case f == parallel.FrameworkTorch:
		perLogit = torchLossBytesPerLogit
	case e < 4 && f == parallel.FrameworkMegatron:
		perLogit += e
	}
	return s * b * (2*e*h + perLogit*float64(m.PaddedVocab(cfg.TP))) / float64(cfg.TP)
}

// stageActivationBytes sums the activations pipeline rank r holds: its
// layers' stored activations for every micro-batch in flight, the one
// layer's recompute working set, and the input and output layers'.
func stageActivationBytes(m model.Model, cfg parallel.Config, f parallel.Framework, r int) float64 {
	perLayer := layerActivationBytes(m, cfg)
	work := recomputeWorkingSet(m, cfg)
	if dense, moe := rankLayerKinds(m, cfg, r); moe > 0 {
		ml := moeLayerActivationBytes(m, cfg)
		perLayer = (float64(dense)*perLayer + float64(moe)*ml) / float64(dense+moe)
		if cfg.Recompute == parallel.RecomputeFull {
			s, b, h := float64(m.SeqLength/cfg.CP), float64(cfg.MicroBatch), float64(m.Hidden)
			full := moeFullLayerBytes(m, cfg, s, b, h, float64(cfg.TP), cfg.SequenceParallel && cfg.TP > 1, unfusedAttention(m, cfg))
			work = math.Max(work, full-ml)
		}
		work += dispatchBufferBytes(m, cfg)
	}
	v := layerMicroBatchesInFlight(m, cfg, r)*perLayer + ScoreBufferBytes(m, cfg)
	if r == 0 {
		v += embeddingActivationBytes(m, cfg)
	}
	// The last stage's output layer (the cross entropy's fp32 softmax) is
	// freed by its own backward, before the first decoder layer's backward
	// rebuilds what recompute dropped: the two transients never coexist.
	out := 0.0
	if r == cfg.PP-1 {
		out = outputActivationBytes(m, cfg, f)
	}
	return v + math.Max(work, out)
}

// torchLossBytesPerLogit is F.cross_entropy's peak per fp32 logit (see
// outputActivationBytes).
const torchLossBytesPerLogit = 12

// otherBytes is the unitemised allowance, plus ZeRO-1/2's buckets.
func otherBytes(cfg parallel.Config, f parallel.Framework) float64 {
	v := float64(otherFixedBytes)
	if f == parallel.FrameworkDeepSpeed && (cfg.ZeroStage == 1 || cfg.ZeroStage == 2) {
		v += 2 * 2 * DeepSpeedBucketElements
	}
	return v
}

// EstimateStage returns the per-GPU bytes of pipeline rank ppRank
// (0..PP-1) of cfg under framework f.
func EstimateStage(m model.Model, cfg parallel.Config, f parallel.Framework, ppRank int) Breakdown {
	cfg = WithStages(m, cfg)
	st := computeModelStates(m, cfg, f, ppRank)
	b := Breakdown{
		Weights:     st.weights,
		Gradients:   st.grads,
		Optimizer:   st.optimizer,
		Activations: stageActivationBytes(m, cfg, f, ppRank),
	}
	b.Other = otherBytes(cfg, f)
	return b
}

// hostBytesPerRank is one rank's host memory: offloaded states, pinned
// staging buffers when offloading, and the process itself.
func hostBytesPerRank(m model.Model, cfg parallel.Config, f parallel.Framework, ppRank int) float64 {
	st := computeModelStates(m, cfg, f, ppRank)
	v := st.host + hostProcessBytes
	if st.host > 0 {
		v += hostPinnedBufferBytes
	}
	return v
}

// HostBytesPerNode is the host memory a node running ranksPerHost ranks of
// cfg needs. Which pipeline ranks share a node depends on placement, so it
// takes the worst rank times ranksPerHost (an upper bound).
func HostBytesPerNode(m model.Model, cfg parallel.Config, f parallel.Framework, ranksPerHost int) float64 {
	cfg = WithStages(m, cfg)
	worst := 0.0
	for r := range cfg.PP {
		worst = math.Max(worst, hostBytesPerRank(m, cfg, f, r))
	}
	return worst * float64(ranksPerHost)
}

// EstimatePlan evaluates every pipeline rank and returns the worst
// (PeakStage is that rank), with the GPU and host capacities filled in and
// the host need of ranksPerHost ranks per node. hostBytes 0 means unknown
// (Estimate.Fits then ignores host memory).
func EstimatePlan(m model.Model, cfg parallel.Config, f parallel.Framework, gpuBytes, hostBytes float64, ranksPerHost int) Estimate {
	cfg = WithStages(m, cfg)
	est := Estimate{
		GPUCapacityBytes:  gpuBytes,
		HostCapacityBytes: hostBytes,
		HostBytesPerNode:  HostBytesPerNode(m, cfg, f, ranksPerHost),
	}
	for r := range cfg.PP {
		b := EstimateStage(m, cfg, f, r)
		if r == 0 || b.Total() > est.PeakBytesPerGPU {
			est.Breakdown, est.PeakBytesPerGPU, est.PeakStage = b, b.Total(), r
		}
	}
	return est
}
