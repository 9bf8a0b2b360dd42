package planner

import "math"

// Latency model.
//
// Compute is priced per GEMM with a roofline: time = max(flops/(peak*eff),
// bytes/HBM) where eff falls off for small matrix dimensions:
//
//	eff(m,n,k) = gemmMaxEfficiency * r(m) * r(n) * r(k),  r(x) = x/(x+gemmRampDim)
//
// Calibration: large bf16 GEMMs in cuBLAS reach ~80% of dense peak on A100
// and H100; Megatron-LM end-to-end runs reach 44% (1.7B, h=2304, TP1) to 47%
// (145B, h=12288, TP8 PP8) of A100 peak including recompute, pipeline bubble
// and communication (Narayanan et al. 2021, arXiv 2104.04473, Table 1);
// cost_test.go checks both rows. Small hidden sizes and micro-batches fall
// far lower because r() and the memory-bound element-wise work dominate.
const (
	gemmMaxEfficiency = 0.80
	gemmRampDim       = 128.0
	// Flash attention's efficiency depends mostly on the head dimension.
	attnHeadDimRamp = 32.0
	bytesPerElem    = 2.0 // bf16 activations, weights and gradients on the wire
	// Element-wise traffic per layer forward, in elements of s*b*h (norms,
	// dropouts, residual adds, bias) and of s*b*ffn (activation function).
	elemwiseHiddenElems = 10.0
	elemwiseFFNElems    = 3.0
	// Megatron's default DDP bucket is 40M parameters; the last bucket's
	// reduction is never hidden behind backward.
	dpBucketParams = 40e6
	// Fraction of the last micro-batch's backward that --overlap-grad-reduce
	// actually hides gradient reduction behind (kernels contend for SMs).
	dpOverlapEfficiency = 0.8
	// Adam reads and writes fp32 params, grads, two moments and the bf16
	// copy: ~ 36 bytes of HBM traffic per parameter per step.
	adamBytesPerParam = 36.0
)

const (
	defaultPeakTFLOPS = 100.0
	defaultHBMTBPerS  = 1.0
)

func gpuPeakFLOPS(g GPUSpec) float64 {
	if g.PeakTFLOPS > 0 {
		return g.PeakTFLOPS * 1e12
	}
	return defaultPeakTFLOPS * 1e12
}

func gpuHBMBytesPerS(g GPUSpec) float64 {
	if g.MemoryBandwidthTBPerS > 0 {
		return g.MemoryBandwidthTBPerS * 1e12
	}
	return defaultHBMTBPerS * 1e12
}

func ramp(x float64) float64 { return x / (x + gemmRampDim) }

// GEMMEfficiency is the fraction of peak a bf16 GEMM of m x k times k x n
// reaches when compute bound.
func GEMMEfficiency(m, n, k float64) float64 {
	return gemmMaxEfficiency * ramp(m) * ramp(n) * ramp(k)
}

// GEMMSeconds is the roofline time of one m x k times k x n bf16 GEMM.
func GEMMSeconds(g GPUSpec, m, n, k float64) float64 {
	if m <= 0 || n <= 0 || k <= 0 {
		return 0
	}
	flops := 2 * m * n * k
	compute := flops / (gpuPeakFLOPS(g) * GEMMEfficiency(m, n, k))
	memory := bytesPerElem * (m*k + k*n + m*n) / gpuHBMBytesPerS(g)
	return math.Max(compute, memory)
}

// LayerShape is what one GPU computes for one decoder layer and one
// micro-batch: tokens is the local token count (s*b/cp).
type layerShape struct {
	tokens, seq, hidden, ffn, kv, heads, headDim float64
	tp, cp                                       float64
	swiglu, sp                                   bool
}

func newLayerShape(m Model, cfg Config) layerShape {
	cp := float64(max(cfg.CP, 1))
	tp := float64(max(cfg.TP, 1))
	h := float64(m.Hidden)
	return layerShape{
		tokens:  float64(m.SeqLength) * float64(max(cfg.MicroBatch, 1)) / cp,
		seq:     float64(m.SeqLength),
		hidden:  h,
		ffn:     float64(m.FFN()),
		kv:      h / float64(m.Heads) * float64(m.Groups()),
		heads:   float64(m.Heads),
		headDim: h / float64(m.Heads),
		tp:      tp, cp: cp,
		swiglu: m.SwiGLU,
		sp:     cfg.SequenceParallel && tp > 1,
	}
}

// LayerFLOPs is one decoder layer's forward FLOPs for one micro-batch on
// one GPU (GEMMs plus the s^2 attention core, GQA-aware).
func (s layerShape) gemmFLOPs() float64 {
	up := s.ffn
	if s.swiglu {
		up = 2 * s.ffn
	}
	qkv := 2 * s.tokens * s.hidden * (s.hidden + 2*s.kv) / s.tp
	out := 2 * s.tokens * s.hidden * s.hidden / s.tp
	mlp := 2*s.tokens*s.hidden*up/s.tp + 2*s.tokens*s.ffn*s.hidden/s.tp
	return qkv + out + mlp
}

// attnFLOPs counts QK^T and AV over the full (unmasked) sequence, as
// Narayanan et al. do: 4*s_local*s*h/t per micro-batch sample.
func (s layerShape) attnFLOPs() float64 { return 4 * s.tokens * s.seq * s.hidden / s.tp }

func (s layerShape) forwardFLOPs() float64 { return s.gemmFLOPs() + s.attnFLOPs() }

func (s layerShape) gemmSeconds(g GPUSpec) float64 {
	up := s.ffn
	if s.swiglu {
		up = 2 * s.ffn
	}
	t := GEMMSeconds(g, s.tokens, (s.hidden+2*s.kv)/s.tp, s.hidden)
	t += GEMMSeconds(g, s.tokens, s.hidden, s.hidden/s.tp)
	t += GEMMSeconds(g, s.tokens, up/s.tp, s.hidden)
	t += GEMMSeconds(g, s.tokens, s.hidden, s.ffn/s.tp)
	return t
}

// attnSeconds prices flash attention: efficiency set by the head dimension
// and the sequence length (the s x s tile loop).
func (s layerShape) attnSeconds(g GPUSpec) float64 {
	eff := gemmMaxEfficiency * s.headDim / (s.headDim + attnHeadDimRamp) * ramp(s.tokens)
	return s.attnFLOPs() / (gpuPeakFLOPS(g) * eff)
}

func (s layerShape) elemwiseSeconds(g GPUSpec) float64 {
	hid := elemwiseHiddenElems * s.tokens * s.hidden
	if s.sp {
		hid /= s.tp
	}
	ffn := elemwiseFFNElems * s.tokens * s.ffn / s.tp
	return bytesPerElem * (hid + ffn) / gpuHBMBytesPerS(g)
}

// computeCost is the per-layer, per-micro-batch compute of one GPU.
type computeCost struct {
	Fwd, Bwd float64 // seconds; Bwd includes recomputation
	attnFwd  float64
}

func layerCompute(m Model, cfg Config, g GPUSpec) computeCost {
	s := newLayerShape(m, cfg)
	attn := s.attnSeconds(g)
	fwd := s.gemmSeconds(g) + attn + s.elemwiseSeconds(g)
	bwd := 2 * fwd
	switch cfg.Recompute {
	case RecomputeFull:
		bwd += fwd
	case RecomputeSelective:
		bwd += attn
	}
	return computeCost{Fwd: fwd, Bwd: bwd, attnFwd: attn}
}

// logitsCompute is the output layer (h x V/t GEMM) plus the cross entropy
// on the last stage, per micro-batch.
func logitsCompute(m Model, cfg Config, g GPUSpec) computeCost {
	s := newLayerShape(m, cfg)
	v := float64(m.Vocab)
	fwd := GEMMSeconds(g, s.tokens, v/s.tp, s.hidden) + 3*bytesPerElem*s.tokens*v/s.tp/gpuHBMBytesPerS(g)
	return computeCost{Fwd: fwd, Bwd: 2 * fwd}
}

// ModelFLOPsPerIteration counts the model FLOPs (forward + 2x backward, no
// recomputation) of one iteration of globalBatch sequences.
func ModelFLOPsPerIteration(m Model, globalBatch int) float64 {
	s := newLayerShape(m, Config{TP: 1, CP: 1, MicroBatch: 1})
	perSeq := float64(m.NumLayers)*s.forwardFLOPs() + 2*s.tokens*s.hidden*float64(m.Vocab)
	return 3 * perSeq * float64(globalBatch)
}

// HardwareFLOPsPerIteration adds the recomputation FLOPs (what Narayanan et
// al. report: full recompute makes it 4 forwards per layer).
func HardwareFLOPsPerIteration(m Model, globalBatch int, r Recompute) float64 {
	s := newLayerShape(m, Config{TP: 1, CP: 1, MicroBatch: 1})
	extra := 0.0
	switch r {
	case RecomputeFull:
		extra = s.forwardFLOPs()
	case RecomputeSelective:
		extra = s.attnFLOPs()
	}
	return ModelFLOPsPerIteration(m, globalBatch) + float64(m.NumLayers)*extra*float64(globalBatch)
}

// Collective costs. A ring over n members moves 2(n-1)/n of the buffer for
// an all-reduce and (n-1)/n for all-gather or reduce-scatter (NCCL's bus
// bandwidth convention); each of its 2(n-1) or (n-1) steps pays the latency.

// AllReduceSeconds prices a ring all-reduce of bytes over n members whose
// slowest ring hop is link.
func AllReduceSeconds(bytes float64, n int, link Link) float64 {
	if n <= 1 || bytes <= 0 {
		return 0
	}
	f := float64(n-1) / float64(n)
	return 2*f*bytes/link.BytesPerS + 2*float64(n-1)*link.LatencyS
}

// AllGatherSeconds prices a ring all-gather (or reduce-scatter) whose
// gathered buffer is bytes.
func AllGatherSeconds(bytes float64, n int, link Link) float64 {
	if n <= 1 || bytes <= 0 {
		return 0
	}
	f := float64(n-1) / float64(n)
	return f*bytes/link.BytesPerS + float64(n-1)*link.LatencyS
}

// P2PSeconds is one point-to-point message.
func P2PSeconds(bytes float64, link Link) float64 {
	if bytes <= 0 {
		return 0
	}
	return bytes/link.BytesPerS + link.LatencyS
}

// tpCommPerLayer is the exposed TP communication of one layer and one
// micro-batch (Megatron does not overlap it by default): 2 all-reduces in
// forward and 2 in backward, or with sequence parallelism 2 all-gathers and
// 2 reduce-scatters each way, which move the same bytes. Full recompute
// repeats the forward ones. link is the TP ring's slowest hop.
func tpCommPerLayer(m Model, cfg Config, link Link) (fwd, bwd float64) {
	if cfg.TP <= 1 {
		return 0, 0
	}
	s := newLayerShape(m, cfg)
	bytes := s.tokens * s.hidden * bytesPerElem
	var one float64
	if s.sp {
		one = 2*AllGatherSeconds(bytes, cfg.TP, link) + 2*AllGatherSeconds(bytes, cfg.TP, link)
	} else {
		one = 2 * AllReduceSeconds(bytes, cfg.TP, link)
	}
	fwd, bwd = one, one
	if cfg.Recompute == RecomputeFull {
		bwd += one
	}
	return fwd, bwd
}

// cpCommPerLayer is ring attention's exchange of K and V blocks: each of the
// cp-1 steps passes the local K,V (2*tokens*kv) to the next rank; half of it
// hides behind the attention block compute. Backward passes K,V and their
// gradients.
func cpCommPerLayer(m Model, cfg Config, link Link, attnFwd float64) (fwd, bwd float64) {
	if cfg.CP <= 1 {
		return 0, 0
	}
	s := newLayerShape(m, cfg)
	kvBytes := 2 * s.tokens * s.kv / s.tp * bytesPerElem
	steps := float64(cfg.CP - 1)
	f := steps * P2PSeconds(kvBytes, link)
	fwd = math.Max(0, f-0.5*attnFwd)
	bwd = math.Max(0, 2*f-attnFwd)
	return fwd, bwd
}

// P2PBytes is the activation (or its gradient) one micro-batch sends between
// consecutive pipeline stages: s*b*h/cp, divided by t with SP.
func P2PBytes(m Model, cfg Config) float64 {
	s := newLayerShape(m, cfg)
	b := s.tokens * s.hidden * bytesPerElem
	if s.sp {
		b /= s.tp
	}
	return b
}

// stageParams is the parameter count of a pipeline stage holding layers
// decoder layers (plus embedding on the first, output layer on the last).
func stageParams(m Model, layers int, first, last bool) float64 {
	p := float64(layers) * float64(m.LayerParameters())
	if first {
		p += float64(m.EmbeddingParameters())
	}
	if last && (m.UntieEmbeddings || !first) {
		// Megatron keeps a copy of the tied embedding on the last stage.
		p += float64(m.EmbeddingParameters())
	}
	return p
}

// dpCommSeconds is the data-parallel gradient synchronisation of one GPU
// holding params parameters (already divided by TP), over dp members whose
// slowest ring hop is link. It returns the total wire time, the part that
// only starts after the last backward (what overlap cannot hide), and the
// per-micro-batch communication DeepSpeed ZeRO-2/3 pay inside every step.
func dpCommSeconds(cfg Config, f Framework, params float64, link Link) (total, tail, perMB float64) {
	n := cfg.DP * cfg.CP // gradients are reduced over DP x CP in Megatron
	if n <= 1 {
		return 0, 0, 0
	}
	bytes := params * bytesPerElem
	total = AllReduceSeconds(bytes, n, link) // RS + AG moves the same bytes
	bucket := math.Min(1, dpBucketParams/math.Max(params, 1))
	tail = total * bucket
	if f == FrameworkDeepSpeed && cfg.ZeroStage >= 2 {
		// ZeRO-2 reduce-scatters gradients at every micro-batch; ZeRO-3 also
		// all-gathers parameters for forward and backward.
		rs := AllGatherSeconds(bytes, n, link)
		perMB = rs
		if cfg.ZeroStage == 3 {
			perMB += 2 * AllGatherSeconds(bytes, n, link)
		}
		total = perMB*float64(cfg.NumMicroBatches) + AllGatherSeconds(bytes, n, link)
		tail = rs * bucket
		if cfg.ZeroStage == 2 {
			tail += AllGatherSeconds(bytes, n, link) // parameter all-gather after the step
		}
	}
	return total, tail, perMB
}

// exposedDP is what stays on the critical path after backward: Megatron's
// --overlap-grad-reduce (and DeepSpeed's overlap_comm) start bucket
// reductions during the last micro-batch's backward, so only the part that
// exceeds dpOverlapEfficiency of that backward, and never less than the
// last bucket, is exposed. Without ZeRO/distributed optimizer overlap is
// assumed too (Megatron's DDP overlaps both).
func exposedDP(total, tail, lastBackward float64) float64 {
	if total <= 0 {
		return 0
	}
	return math.Max(tail, total-dpOverlapEfficiency*lastBackward)
}

// optimizerSeconds is the GPU Adam step over the parameters this GPU owns.
func optimizerSeconds(cfg Config, f Framework, params float64, g GPUSpec) float64 {
	owned := params
	if cfg.DistributedOptimizer || (f == FrameworkDeepSpeed && cfg.ZeroStage >= 1) {
		owned /= float64(max(cfg.DP*cfg.CP, 1))
	}
	owned *= 1 - cfg.Offload.OptimizerFraction
	return owned * adamBytesPerParam / gpuHBMBytesPerS(g)
}
