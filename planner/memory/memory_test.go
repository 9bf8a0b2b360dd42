package memory

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

func relClose(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b)) }

// A 4-layer GPT (h=1024, a=16, f=4h, V=50257 padded to 50304, s=1024, tied)
// on one GPU, Megatron, selective recompute, one micro-batch, worked by hand:
//
//	layer params 12h^2 + 2h = 12,584,960; x4 = 50,339,840
//	embedding 50304*1024 = 51,511,296; final norm 1024
//	P = 101,852,160 -> weights 2P, grads 4P, optimizer 12P
//	activations: 34*s*b*h per layer = 35,651,584; x4 = 142,606,336
//	  + embedding 8*s*b + s*b*h = 1,056,768
//	  + output s*b*(4h + 4V + 2V) = 313,262,080   = 456,925,184
//	    (the final norm's 16-bit input and output, the cross entropy's
//	    fp32 softmax and, beside it, the logits' 16-bit copy)
//	  the scores selective recompute rebuilds for one layer in backward,
//	    5*a*s^2*b = 83,886,080, come after the output layer's backward
//	    freed its 313,262,080: the larger of the two counts
//	  + the scores buffer unfused attention keeps for the run,
//	    2*a*s^2*b = 33,554,432                        = 490,479,616
//	other = otherFixedBytes (4 GiB, measured; see memory.go)
func TestEstimateStageMemoryHandComputed(t *testing.T) {
	// Unfused attention, as in the paper: selective recompute rebuilds one
	// layer's scores during backward (the +scores below).
	m := model.Model{NumLayers: 4, Hidden: 1024, Heads: 16, SeqLength: 1024, Vocab: 50257, MaterializedAttention: true}
	cfg := parallel.Config{TP: 1, PP: 1, DP: 1, MicroBatch: 1, NumMicroBatches: 8, Recompute: parallel.RecomputeSelective}
	got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
	const p = 101852160.0
	const scores = 5 * 16 * 1024 * 1024 * 1.0
	const buffer = 2 * 16 * 1024 * 1024 * 1.0 // e*a*s^2*b/t
	want := Breakdown{Weights: 2 * p, Gradients: 4 * p, Optimizer: 12 * p, Activations: 456925184 + buffer}
	want.Other = 4 * gpu.GiB
	if !relClose(got.Weights, want.Weights, 1e-12) || !relClose(got.Gradients, want.Gradients, 1e-12) ||
		!relClose(got.Optimizer, want.Optimizer, 1e-12) || !relClose(got.Activations, want.Activations, 1e-12) ||
		!relClose(got.Other, want.Other, 1e-12) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// Same model, TP=2 with SP, PP=2, distributed optimizer over DP=4, 8
	// micro-batches: rank 0 holds 2 layers x 2 micro-batches in flight.
	//   layer/GPU = (12h^2)/2 + 2h = 6,293,504; embedding 50432*1024/2
	//   rank 0 P = 2*6,293,504 + 25,821,184 = 38,408,192
	//   states 6P + 12P/4 = 9P
	//   activations: 2*2 layers * 34*s*b*h/2 + 2*(8*s*b + s*b*h)/2, the
	//   recomputed scores and the scores buffer (both /TP)
	cfg = parallel.Config{TP: 2, PP: 2, DP: 4, MicroBatch: 1, NumMicroBatches: 8, SequenceParallel: true,
		Recompute: parallel.RecomputeSelective, DistributedOptimizer: true}
	got = EstimateStage(m, cfg, parallel.FrameworkMegatron, 0)
	const p0 = 38408192.0
	act := 4*34*1024*1024/2.0 + 2*(8*1024+1024*1024)/2.0 + scores/2 + buffer/2
	if !relClose(got.Weights+got.Gradients+got.Optimizer, 9*p0, 1e-12) || !relClose(got.Activations, act, 1e-12) {
		t.Errorf("TP2 PP2: states %g (want %g), activations %g (want %g)",
			got.Weights+got.Gradients+got.Optimizer, 9*p0, got.Activations, act)
	}
	// Flash attention (the default): no score matrices stored, rebuilt
	// or buffered, so the same two configs lose exactly those terms.
	m.MaterializedAttention = false
	if got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0); !relClose(got.Activations, act-scores/2-buffer/2, 1e-12) {
		t.Errorf("flash TP2 PP2: activations %g, want %g", got.Activations, act-scores/2-buffer/2)
	}
	cfg = parallel.Config{TP: 1, PP: 1, DP: 1, MicroBatch: 1, NumMicroBatches: 8, Recompute: parallel.RecomputeSelective}
	if got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0); !relClose(got.Activations, 456925184, 1e-12) {
		t.Errorf("flash TP1: activations %g, want %g", got.Activations, 456925184.0)
	}
	// A DeepSpeed or torch job brings its own loss: no 16-bit copy of the
	// logits is assumed (2*s*b*V = 103,022,592 less).
	if got := EstimateStage(m, cfg, parallel.FrameworkDeepSpeed, 0); !relClose(got.Activations, 353902592, 1e-12) {
		t.Errorf("flash TP1 DeepSpeed: activations %g, want %g", got.Activations, 353902592.0)
	}
	// fp32 has no copy either (.float() returns the tensor itself): the
	// output is s*b*(8h + 4V); a layer keeps 66*s*b*h (34 less the two
	// 1-byte dropout masks, doubled, plus the masks), the embedding
	// 8*s*b + s*b*h as in 16 bits; no flash kernel takes fp32, so the
	// unfused attention's 4-byte scores buffer 4*a*s^2*b is there.
	cfg.Precision = gpu.PrecisionFP32
	fp32 := 4*66*1024*1024.0 + (8*1024 + 1024*1024.0) + 1024*(8*1024+4*50304.0) + 2*buffer
	if got := EstimateStage(m, cfg, parallel.FrameworkMegatron, 0); !relClose(got.Activations, fp32, 1e-12) {
		t.Errorf("flash TP1 fp32: activations %g, want %g", got.Activations, fp32)
	}
}

// With flash attention, recompute "none" stores what "selective" stores (no
// score matrices either way); with unfused attention it stores more.
func TestFlashAttentionNoneEqualsSelective(t *testing.T) {
	for _, materialized := range []bool{false, true} {
		m, _ := model.Preset("llama3-8b")
		m.MaterializedAttention = materialized
		none := EstimateStage(m, parallel.Config{TP: 2, PP: 1, DP: 4, MicroBatch: 1, NumMicroBatches: 4, SequenceParallel: true, Recompute: parallel.RecomputeNone}, parallel.FrameworkMegatron, 0)
		sel := EstimateStage(m, parallel.Config{TP: 2, PP: 1, DP: 4, MicroBatch: 1, NumMicroBatches: 4, SequenceParallel: true, Recompute: parallel.RecomputeSelective}, parallel.FrameworkMegatron, 0)
		if equal := relClose(none.Activations, sel.Activations, 1e-12); equal == materialized {
			t.Errorf("materialized=%v: none %.3g GB, selective %.3g GB", materialized, none.Activations/1e9, sel.Activations/1e9)
		}
	}
}

// Megatron's unfused backends store attention scores; the fused and
// flash ones (and the default, auto) do not.
func TestMegatronArgsAttentionBackend(t *testing.T) {
	base := []string{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1000"}
	for backend, want := range map[string]bool{"": false, "auto": false, "flash": false, "fused": false, "unfused": true, "local": true} {
		args := base
		if backend != "" {
			args = append(append([]string{}, base...), "--attention-backend", backend)
		}
		m, _, _, err := megatron.ModelFromArgs(args)
		if err != nil {
			t.Fatal(err)
		}
		if m.MaterializedAttention != want {
			t.Errorf("--attention-backend %q: MaterializedAttention %v, want %v", backend, m.MaterializedAttention, want)
		}
	}
}

// TestKorthikantiTable2 checks that the generalised per-layer formula
// reduces to Korthikanti et al. 2022, Table 2, for a GPT (MHA, GeLU, f=4h),
// here GPT-3 175B's layer at s=2048, b=1, t=8.
func TestKorthikantiTable2(t *testing.T) {
	m, _ := model.Preset("gpt3-175b")
	m.MaterializedAttention = true // the paper's attention stores its scores
	s, b, h, a, tp := 2048.0, 1.0, 12288.0, 96.0, 8.0
	cases := []struct {
		name string
		sp   bool
		rc   parallel.Recompute
		tp   int
		want float64
	}{
		{"no parallelism", false, parallel.RecomputeNone, 1, s * b * h * (34 + 5*a*s/h)},
		{"tensor parallel", false, parallel.RecomputeNone, 8, s * b * h * (10 + 24/tp + 5*a*s/(h*tp))},
		{"tensor + sequence parallel", true, parallel.RecomputeNone, 8, s * b * h / tp * (34 + 5*a*s/h)},
		{"tensor parallel + selective", false, parallel.RecomputeSelective, 8, s * b * h * (10 + 24/tp)},
		{"tensor + sequence + selective", true, parallel.RecomputeSelective, 8, 34 * s * b * h / tp},
		{"full recompute", false, parallel.RecomputeFull, 8, 2 * s * b * h},
	}
	for _, c := range cases {
		cfg := Normalized(parallel.Config{TP: c.tp, SequenceParallel: c.sp, Recompute: c.rc, MicroBatch: 1})
		if got := layerActivationBytes(m, cfg); !relClose(got, c.want, 1e-12) {
			t.Errorf("%s: %g, want %g", c.name, got, c.want)
		}
	}
}

// The paper's headline (abstract, and Fig. 7 for its 175B/530B/1T configs
// of Table 3: t=8, s=2048, b=1): sequence parallelism with selective
// recompute cuts activation memory about 5x against tensor parallelism
// alone.
func TestKorthikantiFiveTimesReduction(t *testing.T) {
	cases := []model.Model{ // the paper's attention stores its scores
		{NumLayers: 96, Hidden: 12288, Heads: 96, SeqLength: 2048, Vocab: 51200, MaterializedAttention: true},
		{NumLayers: 105, Hidden: 20480, Heads: 128, SeqLength: 2048, Vocab: 51200, MaterializedAttention: true},
		{NumLayers: 128, Hidden: 25600, Heads: 160, SeqLength: 2048, Vocab: 51200, MaterializedAttention: true},
	}
	for _, m := range cases {
		base := layerActivationBytes(m, Normalized(parallel.Config{TP: 8, MicroBatch: 1, Recompute: parallel.RecomputeNone}))
		best := layerActivationBytes(m, Normalized(parallel.Config{TP: 8, MicroBatch: 1, SequenceParallel: true, Recompute: parallel.RecomputeSelective}))
		if r := base / best; r < 4.5 || r > 6 {
			t.Errorf("h=%d: reduction %.2fx, paper reports about 5x", m.Hidden, r)
		}
	}
}

// logitsCopyBeyondMegatron is what the estimator keeps at the loss beyond
// theoretical_memory_usage.py's output term, which counts the cross
// entropy's fp32 softmax (4*s*b*V) but not the logits' 16-bit copy beside it
// (2*s*b*V/t, outputActivationBytes): on a 16-bit first stage that is also
// the last (PP 1), 0 elsewhere.
func logitsCopyBeyondMegatron(m model.Model, cfg parallel.Config) float64 {
	if cfg.PP > 1 {
		return 0
	}
	return 2 * float64(m.SeqLength) * float64(cfg.MicroBatch) * float64(m.PaddedVocab(cfg.TP)) / float64(cfg.TP)
}

// megatronTheoretical reproduces megatron/training/theoretical_memory_usage.py
// (compute_weight_and_optimizer_memory and compute_activation_memory, which
// assumes sequence parallelism and selective recompute) for a GPT.
func megatronTheoretical(m model.Model, cfg parallel.Config) (states, act float64) {
	L, h, a := float64(m.NumLayers), float64(m.Hidden), float64(m.Heads)
	g, f := float64(m.Groups()), float64(m.FFN())
	s, b := float64(m.SeqLength), float64(cfg.MicroBatch)
	pp, tp, dp := float64(cfg.PP), float64(cfg.TP), float64(cfg.DP)
	layers := 2 * L * h * h * ((1 + g/a) + f/h + 2/h + 1/(L*h))
	emb := h * float64(m.PaddedVocab(cfg.TP))
	shard := (layers/pp + emb) / tp
	if m.UntieEmbeddings && cfg.PP == 1 {
		shard += emb / tp
	}
	bytesPerParam := 18.0
	if cfg.DistributedOptimizer {
		bytesPerParam = 6 + 12/dp
	}
	act = s * b * h * (18 + 4*f/h) * L
	act += 8 * s * b * pp
	act += s * b * h * pp
	if cfg.VPP > 1 {
		act *= 1 + (pp-1)/(pp*float64(cfg.VPP))
	}
	if cfg.VPP <= 1 && cfg.PP > 1 {
		act *= math.Min(1, float64(cfg.NumMicroBatches)/pp)
	}
	if cfg.PP == 1 {
		act += s * b * h * 4 * (1 + float64(m.PaddedVocab(cfg.TP))/h)
	}
	return shard * bytesPerParam, act / tp
}

// theoreticalCase is one model and layout that Megatron-LM's
// theoretical_memory_usage.py is compared on.
type theoreticalCase struct {
	m   model.Model
	cfg parallel.Config
}

// theoreticalMemoryCases are the layouts both Megatron comparisons use:
// the formula as written beside the estimator and the kit's own script.
func theoreticalMemoryCases() []theoreticalCase {
	gpt175, _ := model.Preset("gpt3-175b")
	gpt13, _ := model.Preset("gpt3-13b")
	return []theoreticalCase{
		{gpt175, parallel.Config{TP: 8, PP: 8, DP: 16, MicroBatch: 1, NumMicroBatches: 64, DistributedOptimizer: true}},
		{gpt175, parallel.Config{TP: 8, PP: 8, DP: 4, MicroBatch: 1, NumMicroBatches: 4}},
		{gpt175, parallel.Config{TP: 8, PP: 12, DP: 2, VPP: 2, MicroBatch: 1, NumMicroBatches: 48, DistributedOptimizer: true}},
		{gpt13, parallel.Config{TP: 2, PP: 1, DP: 8, MicroBatch: 2, NumMicroBatches: 8}},
		{gpt13, parallel.Config{TP: 4, PP: 4, DP: 2, MicroBatch: 4, NumMicroBatches: 2, DistributedOptimizer: true}},
	}
}

func TestMatchesMegatronTheoreticalMemory(t *testing.T) {
	cases := theoreticalMemoryCases()
	for _, c := range cases {
		c.cfg.SequenceParallel, c.cfg.Recompute = true, parallel.RecomputeSelective
		states, act := megatronTheoretical(c.m, c.cfg)
		got := EstimateStage(c.m, c.cfg, parallel.FrameworkMegatron, 0)
		// States differ only by norm weights (Megatron counts LayerNorm
		// biases and keeps them unsplit) and the final norm's placement.
		if gs := got.Weights + got.Gradients + got.Optimizer; !relClose(gs, states, 2e-3) {
			t.Errorf("%s %+v: states %.4g GB, Megatron %.4g GB", c.m.Name, c.cfg, gs/1e9, states/1e9)
		}
		// Activations agree exactly on the first stage (but for the logits'
		// copy): Megatron's formula, like the presets' default flash
		// attention, never stores scores.
		if act += logitsCopyBeyondMegatron(c.m, c.cfg); !relClose(got.Activations, act, 1e-9) {
			t.Errorf("%s %+v: activations %.6g GB, Megatron %.6g GB", c.m.Name, c.cfg, got.Activations/1e9, act/1e9)
		}
	}
}

// ZeRO paper (Rajbhandari et al. 2020, Fig. 1 / sec. 5.1): a 7.5B model on
// 64 GPUs with mixed-precision Adam (K=12) needs 120 GB per GPU baseline,
// 31.4 GB with P_os, 16.6 GB with P_os+g and 1.9 GB with P_os+g+p.
func TestZeROPaperExample(t *testing.T) {
	tiny := model.Model{NumLayers: 1, Hidden: 1, Heads: 1, SeqLength: 1, Vocab: 1}
	want := []float64{120, 31.4, 16.6, 1.9}
	for stage, w := range want {
		cfg := Normalized(parallel.Config{DP: 64, ZeroStage: stage})
		st := deepSpeedStates(tiny, cfg, 7.5e9)
		got := st.weights + st.grads + st.optimizer - workingSet(tiny, cfg)
		if math.Abs(got/1e9-w) > 0.05 {
			t.Errorf("ZeRO-%d: %.2f GB, paper %.1f GB", stage, got/1e9, w)
		}
	}
}

func workingSet(m model.Model, cfg parallel.Config) float64 {
	if cfg.ZeroStage < 3 {
		return 0
	}
	return 4 * largestLayerPerGPU(m, cfg.TP)
}

// DeepSpeed's own estimators (deepspeed/runtime/zero/stage_1_and_2.py
// estimate_zero2_model_states_mem_needs and stage3.py
// estimate_zero3_model_states_mem_needs; see deepspeed.md), for one node of
// G GPUs, additional_buffer_factor left out of the CPU side (it is a
// safety margin), zero_init=True. L = 4 x largest layer.
func TestDeepSpeedEstimators(t *testing.T) {
	m, _ := model.Preset("llama2-13b")
	const G = 4
	p := float64(m.Parameters())
	states := func(z int, off parallel.Offload) (gpu, host float64) {
		cfg := parallel.Config{TP: 1, PP: 1, DP: G, ZeroStage: z, Offload: off}
		// P is the whole model here, as DeepSpeed's estimators take it.
		st := deepSpeedStates(m, Normalized(cfg), p)
		return st.weights + st.grads + st.optimizer, G * st.host
	}
	L := 4 * largestLayerPerGPU(m, 1)
	cases := []struct {
		name                 string
		z                    int
		off                  parallel.Offload
		dsGPU, dsCPU, ourGap float64
	}{
		// ZeRO-2 with CPU offload: GPU = 2P; CPU = P*max(4G, 16).
		{"zero2 offload", 2, parallel.Offload{OptimizerFraction: 1}, 2 * p, p * math.Max(4*G, 16), 0},
		// ZeRO-3 offload params+optimizer: GPU = L; CPU = 18P.
		{"zero3 offload all", 3, parallel.Offload{OptimizerFraction: 1, Params: true}, L, 18 * p, 0},
		// ZeRO-3 offload optimizer: GPU = L + 2P/G; CPU = 16P.
		{"zero3 offload optimizer", 3, parallel.Offload{OptimizerFraction: 1}, L + 2*p/G, 16 * p, 0},
		// ZeRO-3 without offload: GPU = L + 18P/G, where DeepSpeed's 18 is
		// 16-bit params 2 + fp32 params, m, v and grads 16. We count 16-bit
		// params 2 + 16-bit grads 2 + 12 = 16: 2P/G less (the fp32 grad
		// partition exists only during the step, after activations are freed).
		{"zero3", 3, parallel.Offload{}, L + 18*p/G, -1, 2 * p / G},
		// ZeRO-2 without offload: GPU = 2P + 18P/G (v0.14.4's source, run
		// by TestDeepSpeedEstimatorsFromKit; this case said 4P + 16P/G
		// before). Its 18 counts the fp32 grad partition (4P/G) built at
		// step time; the ZeRO paper's 2P + 14P/G leaves it out.
		{"zero2", 2, parallel.Offload{}, 2*p + 18*p/G, -1, 4 * p / G},
	}
	for _, c := range cases {
		gpu, host := states(c.z, c.off)
		if !relClose(gpu+c.ourGap, c.dsGPU, 1e-9) {
			t.Errorf("%s: GPU %.4g GB + gap %.4g, DeepSpeed %.4g GB", c.name, gpu/1e9, c.ourGap/1e9, c.dsGPU/1e9)
		}
		if c.dsCPU >= 0 && !relClose(host, c.dsCPU, 1e-9) {
			t.Errorf("%s: host %.4g GB, DeepSpeed %.4g GB", c.name, host/1e9, c.dsCPU/1e9)
		}
	}
}

func TestInterleavedInFlightFactor(t *testing.T) {
	m := model.Model{NumLayers: 48, Hidden: 1024, Heads: 16, SeqLength: 1024, Vocab: 1000}
	for _, c := range []struct{ pp, vpp, mb int }{{4, 2, 16}, {4, 3, 8}, {8, 2, 64}, {2, 4, 8}} {
		cfg := Normalized(parallel.Config{PP: c.pp, VPP: c.vpp, NumMicroBatches: c.mb})
		got := layerMicroBatchesInFlight(m, cfg, 0)
		want := 48 * (1 + float64(c.pp-1)/float64(c.pp*c.vpp))
		if !relClose(got, want, 1e-12) {
			t.Errorf("pp=%d vpp=%d: %g layer-microbatches, want L*(1+(p-1)/(pv)) = %g", c.pp, c.vpp, got, want)
		}
	}
	// 1F1B: rank r holds min(PP-r, m) micro-batches of its layers.
	cfg := Normalized(parallel.Config{PP: 4, NumMicroBatches: 2})
	for r, want := range []float64{24, 24, 24, 12} {
		if got := layerMicroBatchesInFlight(m, cfg, r); got != want {
			t.Errorf("1F1B rank %d: %g, want %g", r, got, want)
		}
	}
}

func TestStageParametersSumToModel(t *testing.T) {
	for _, name := range []string{"gpt3-13b", "llama2-70b", "llama3-8b"} {
		m, _ := model.Preset(name)
		for _, pp := range []int{1, 2, 4, 5} {
			cfg := parallel.Config{TP: 1, PP: pp}
			sum := 0.0
			for r := range pp {
				sum += StageParameters(m, cfg, r)
			}
			// Tied models with PP > 1 hold a second embedding copy on the
			// last stage; the vocabulary is padded to 128.
			want := float64(m.Parameters()) + float64((m.PaddedVocab(1)-m.Vocab)*m.Hidden)
			if m.UntieEmbeddings {
				want += float64((m.PaddedVocab(1) - m.Vocab) * m.Hidden)
			} else if pp > 1 {
				want += float64(m.PaddedVocab(1) * m.Hidden)
			}
			if !relClose(sum, want, 1e-12) {
				t.Errorf("%s pp=%d: stages sum to %.6g, want %.6g", name, pp, sum, want)
			}
		}
	}
}

// propertyConfigs spans the space the search walks.
func propertyConfigs(yield func(model.Model, parallel.Config, parallel.Framework)) {
	for _, name := range []string{"gpt3-1.3b", "gpt3-13b", "llama2-70b", "llama3-8b"} {
		m, _ := model.Preset(name)
		for _, f := range []parallel.Framework{parallel.FrameworkMegatron, parallel.FrameworkDeepSpeed} {
			for _, tp := range []int{1, 2, 4, 8} {
				for _, pp := range []int{1, 2, 4} {
					for _, mb := range []int{1, 4} {
						for _, z := range []int{0, 1, 2, 3} {
							cfg := parallel.Config{TP: tp, PP: pp, DP: 4, MicroBatch: mb, NumMicroBatches: 16,
								ZeroStage: z, Recompute: parallel.RecomputeNone}
							yield(m, cfg, f)
						}
					}
				}
			}
		}
	}
}

func totalAllStages(m model.Model, cfg parallel.Config, f parallel.Framework) float64 {
	return EstimatePlan(m, cfg, f, 0, 0, 8).PeakBytesPerGPU
}

func TestMemoryProperties(t *testing.T) {
	propertyConfigs(func(m model.Model, cfg parallel.Config, f parallel.Framework) {
		for r := range cfg.PP {
			prev := math.Inf(1)
			for _, rc := range []parallel.Recompute{parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull} {
				c := cfg
				c.Recompute = rc
				a := EstimateStage(m, c, f, r).Activations
				if a > prev {
					t.Errorf("%s %+v rank %d: %s recompute raises activations (%g > %g)", m.Name, cfg, r, rc, a, prev)
				}
				prev = a
			}
		}
		base := totalAllStages(m, cfg, f)
		sp := cfg
		sp.SequenceParallel = true
		if v := totalAllStages(m, sp, f); v > base {
			t.Errorf("%s %+v: sequence parallel raises memory", m.Name, cfg)
		}
		if f == parallel.FrameworkMegatron {
			do := cfg
			do.DistributedOptimizer = true
			if v := totalAllStages(m, do, f); v > base {
				t.Errorf("%s %+v: distributed optimizer raises memory", m.Name, cfg)
			}
		}
		if cfg.TP < 8 && m.Heads%(2*cfg.TP) == 0 {
			big := cfg
			big.TP *= 2
			if v := totalAllStages(m, big, f); v > base {
				t.Errorf("%s %+v: TP %d raises per-GPU bytes %g > %g", m.Name, cfg, big.TP, v, base)
			}
		}
		checkOffloadMonotone(t, m, cfg, f)
	})
}

func checkOffloadMonotone(t *testing.T, m model.Model, cfg parallel.Config, f parallel.Framework) {
	prevGPU, prevHost := math.Inf(1), 0.0
	for _, off := range []parallel.Offload{{}, {OptimizerFraction: 0.5}, {OptimizerFraction: 1}, {OptimizerFraction: 1, Params: true}} {
		c := cfg
		c.Offload = off
		est := EstimatePlan(m, c, f, 0, 0, 8)
		if est.PeakBytesPerGPU > prevGPU || est.HostBytesPerNode < prevHost {
			t.Errorf("%s %s %+v offload %+v: GPU %g (prev %g), host %g (prev %g)", m.Name, f, cfg, off,
				est.PeakBytesPerGPU, prevGPU, est.HostBytesPerNode, prevHost)
		}
		prevGPU, prevHost = est.PeakBytesPerGPU, est.HostBytesPerNode
	}
}

func TestEstimatePlanMemory(t *testing.T) {
	m, _ := model.Preset("gpt3-13b")
	// 1F1B with PP=4: rank 0 holds 4 micro-batches of its 10 layers, the
	// last rank one micro-batch plus the logits; rank 0 is the peak.
	cfg := parallel.Config{TP: 2, PP: 4, DP: 4, MicroBatch: 2, NumMicroBatches: 32, SequenceParallel: true,
		Recompute: parallel.RecomputeSelective, DistributedOptimizer: true}
	est := EstimatePlan(m, cfg, parallel.FrameworkMegatron, 80*gpu.GiB, 1024*gpu.GiB, 8)
	if est.PeakStage != 0 {
		t.Errorf("peak stage %d, want 0", est.PeakStage)
	}
	if est.PeakBytesPerGPU != EstimateStage(m, cfg, parallel.FrameworkMegatron, 0).Total() || est.GPUCapacityBytes != 80*gpu.GiB {
		t.Errorf("estimate %+v", est)
	}
	if !est.Fits() || est.PeakBytesPerGPU < 10*gpu.GiB || est.PeakBytesPerGPU > 40*gpu.GiB {
		t.Errorf("13B on 32 GPUs: peak %.1f GiB, want a fit between 10 and 40 GiB", est.PeakBytesPerGPU/gpu.GiB)
	}
	// Each of 8 ranks: 3 GiB process overhead, no offload.
	if est.HostBytesPerNode != 8*hostProcessBytes {
		t.Errorf("host bytes %g, want %g", est.HostBytesPerNode, 8.0*hostProcessBytes)
	}
	// Issue 6's case: 13B on one host of 4 x 40 GB does not fit without
	// offload even with ZeRO-3 and full recompute, and fits with it.
	small := parallel.Config{TP: 1, PP: 1, DP: 4, MicroBatch: 1, NumMicroBatches: 16, ZeroStage: 3, Recompute: parallel.RecomputeFull}
	if e := EstimatePlan(m, small, parallel.FrameworkDeepSpeed, 40*gpu.GiB, 512*gpu.GiB, 4); e.Fits() {
		t.Errorf("13B ZeRO-3 on 4x40GB fits without offload? %.1f GiB", e.PeakBytesPerGPU/gpu.GiB)
	}
	small.Offload = parallel.Offload{OptimizerFraction: 1}
	if e := EstimatePlan(m, small, parallel.FrameworkDeepSpeed, 40*gpu.GiB, 512*gpu.GiB, 4); !e.Fits() {
		t.Errorf("13B ZeRO-3 + optimizer offload on 4x40GB: %.1f GiB GPU, %.1f GiB host", e.PeakBytesPerGPU/gpu.GiB, e.HostBytesPerNode/gpu.GiB)
	}
}

// BenchmarkEstimatePlanMemory is the call the search makes per candidate.
func BenchmarkEstimatePlanMemory(b *testing.B) {
	m, _ := model.Preset("gpt3-175b")
	cfg := parallel.Config{TP: 8, PP: 16, DP: 8, VPP: 3, MicroBatch: 1, NumMicroBatches: 128, SequenceParallel: true,
		Recompute: parallel.RecomputeSelective, DistributedOptimizer: true}
	for b.Loop() {
		EstimatePlan(m, cfg, parallel.FrameworkMegatron, 80*gpu.GiB, 1024*gpu.GiB, 8)
	}
}

func TestHostMemoryRejectsOversubscribedNode(t *testing.T) {
	m, _ := model.Preset("gpt3-13b")
	cfg := parallel.Config{DP: 8, ZeroStage: 2, MicroBatch: 1, NumMicroBatches: 8, Recompute: parallel.RecomputeFull,
		Offload: parallel.Offload{OptimizerFraction: 1}}
	// 8 ranks each hold 16 B x P/8 offloaded + 1 GiB pinned + 3 GiB process.
	p := StageParameters(m, cfg, 0)
	want := 8 * (16*p/8 + hostPinnedBufferBytes + hostProcessBytes)
	e := EstimatePlan(m, cfg, parallel.FrameworkDeepSpeed, 80*gpu.GiB, 128*gpu.GiB, 8)
	if !relClose(e.HostBytesPerNode, want, 1e-12) {
		t.Errorf("host bytes %g, want %g", e.HostBytesPerNode, want)
	}
	if e.Fits() {
		t.Errorf("%.0f GiB of host state on a 128 GiB node must not fit", e.HostBytesPerNode/gpu.GiB)
	}
	if e = EstimatePlan(m, cfg, parallel.FrameworkDeepSpeed, 80*gpu.GiB, 512*gpu.GiB, 8); !e.Fits() {
		t.Errorf("512 GiB node: GPU %.1f GiB, host %.0f GiB should fit", e.PeakBytesPerGPU/gpu.GiB, e.HostBytesPerNode/gpu.GiB)
	}
}

func TestContextParallelDividesSequence(t *testing.T) {
	m, _ := model.Preset("llama3-8b")
	one := Normalized(parallel.Config{TP: 2, SequenceParallel: true, Recompute: parallel.RecomputeSelective, MicroBatch: 1})
	cp := one
	cp.CP = 4
	if a, b := layerActivationBytes(m, one), layerActivationBytes(m, cp); !relClose(a, 4*b, 1e-12) {
		t.Errorf("CP=4 layer activations %g, want a quarter of %g", b, a)
	}
}
