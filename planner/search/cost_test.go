package search

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// predictFixed prices cfg on c with ranks in default order on hosts in
// file order.
func predictFixed(t *testing.T, c *cluster.Cluster, m model.Model, cfg parallel.Config) Prediction {
	t.Helper()
	cfg.NumMicroBatches = cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP)
	if err := megatron.Validate(m, cfg, c.TotalGPUs()); err != nil {
		t.Fatalf("test config invalid: %v", err)
	}
	e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
	pl := newPlacer(e, cluster.HostSymmetry(c), startOrders(c))
	order := make([]int, len(c.Hosts))
	for i := range order {
		order[i] = i
	}
	bh := make([]int, e.nBlocks)
	pl.blocks(order, bh)
	return e.predict(bh)
}

func dgxA100(hosts int) *cluster.Cluster {
	// DGX A100: NVSwitch 300 GB/s per GPU each way, 8x HDR 200 Gbit/s.
	return testCluster([]islandDef{{hosts: hosts, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
}

// Narayanan et al. 2021, eq. (3): with full recompute one iteration costs
// 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) FLOPs.
func TestHardwareFLOPsMatchNarayanan(t *testing.T) {
	m := gpt3_175b
	B, s, l, h, V := 1536.0, 2048.0, 96.0, 12288.0, 51200.0
	want := 96 * B * s * l * h * h * (1 + s/(6*h) + V/(16*l*h))
	got := HardwareFLOPsPerIteration(m, 1536, parallel.RecomputeFull)
	if !approx(got, want, 1e-12) {
		t.Fatalf("hardware FLOPs %g, want %g", got, want)
	}
	if r := ModelFLOPsPerIteration(m, 1536) / got; r > 0.76 || r < 0.74 {
		t.Fatalf("model/hardware FLOPs %g, want ~3/4", r)
	}
}

func TestGEMMSecondsByHand(t *testing.T) {
	// 4096^3 on A100: eff = max*(4096/(4096+ramp))^3 with Ampere's fitted
	// curve; 2*4096^3 FLOPs (compute bound: 3*4096^2*2 bytes take 49 us).
	cv := gpu.Curves["ampere"]
	eff := cv.GEMMMax * math.Pow(1/(1+math.Pow(cv.GEMMRamp/4096, cv.GEMMRampPow)), 3)
	want := 2*math.Pow(4096, 3)/(312e12*eff) + gpu.GEMMLaunchS
	if got := gpu.GEMMSeconds(gpuA100, 4096, 4096, 4096); !approx(got, want, 1e-12) {
		t.Fatalf("GEMM 4096^3: %g s, want %g", got, want)
	}
	if got := gpu.GEMMKernelTFLOPS(gpuA100, gpu.PrecisionBF16, 4096, 4096, 4096); !approx(got, 2*math.Pow(4096, 3)/want/1e12, 1e-12) {
		t.Fatalf("GEMM 4096^3: %g TFLOP/s, want %g", got, 2*math.Pow(4096, 3)/want/1e12)
	}
	// Small GEMMs are far less efficient than large ones (ramp and launch).
	small, large := gpu.GEMMKernelTFLOPS(gpuA100, gpu.PrecisionBF16, 256, 256, 256), gpu.GEMMKernelTFLOPS(gpuA100, gpu.PrecisionBF16, 8192, 8192, 8192)
	if small > 0.5*large {
		t.Fatalf("256^3 runs at %g TFLOP/s, not below half of 8192^3's %g", small, large)
	}
	// FP8 on H100 runs at its FP8 rate and fitted ceiling; a measured scale
	// multiplies it, and GEMMKernelTFLOPS ignores the scale.
	h := gpuH100
	h.PeakFP8TFLOPS = 1979
	hv := gpu.Curves["hopper"]
	big := hv.ShapeEfficiency(8192, 8192, 8192)
	fp8 := 2 * math.Pow(8192, 3) / (2*math.Pow(8192, 3)/(1979e12*hv.FP8Max*big) + gpu.GEMMLaunchS) / 1e12
	if got, want := gpu.GEMMKernelTFLOPS(h, gpu.PrecisionFP8, 8192, 8192, 8192), fp8; !approx(got, want, 1e-9) {
		t.Fatalf("FP8 8192^3 on H100: %g TFLOP/s, want %g", got, want)
	}
	h.ComputeScaleFP8 = 0.5
	half := 2 * math.Pow(8192, 3) / (2*math.Pow(8192, 3)/(0.5*1979e12*hv.FP8Max*big) + gpu.GEMMLaunchS) / 1e12
	if got, want := 2*math.Pow(8192, 3)/gpu.CurveGEMMSeconds(h, hv, gpu.PrecisionFP8, 8192, 8192, 8192)/1e12, half; !approx(got, want, 1e-9) {
		t.Fatalf("FP8 with scale 0.5: %g TFLOP/s, want %g", got, want)
	}
	if got := gpu.GEMMKernelTFLOPS(h, gpu.PrecisionFP8, 8192, 8192, 8192); !approx(got, fp8, 1e-9) {
		t.Fatalf("GEMMKernelTFLOPS used the scale: %g", got)
	}
}

func TestCollectivesByHand(t *testing.T) {
	l := cluster.Link{BytesPerS: 100e9, LatencyS: 10e-6}
	// Ring all-reduce of 1 GB over 8: 2*7/8*1e9/1e11 + 14*10us.
	if got, want := AllReduceSeconds(1e9, 8, l), 0.0175+14*10e-6; !approx(got, want, 1e-12) {
		t.Fatalf("all-reduce %g, want %g", got, want)
	}
	if got, want := AllGatherSeconds(1e9, 8, l), 0.00875+7*10e-6; !approx(got, want, 1e-12) {
		t.Fatalf("all-gather %g, want %g", got, want)
	}
	if AllReduceSeconds(1e9, 1, l) != 0 {
		t.Fatal("all-reduce over one rank costs time")
	}
	// TP with SP (2 AG + 2 RS) moves what 2 all-reduces do: equal bandwidth
	// terms, same latency terms.
	m := gpt3_175b
	cfg := parallel.Config{TP: 8, CP: 1, MicroBatch: 1}
	f1, b1 := tpCommPerLayer(m, cfg, l)
	cfg.SequenceParallel = true
	f2, b2 := tpCommPerLayer(m, cfg, l)
	if !approx(f1, f2, 1e-12) || !approx(b1, b2, 1e-12) {
		t.Fatalf("TP comm with SP %g/%g differs from without %g/%g", f2, b2, f1, b1)
	}
	// Per layer forward: 2 all-reduces of s*b*h*2 bytes = 2048*12288*2.
	if want := 2 * AllReduceSeconds(2048*12288*2, 8, l); !approx(f1, want, 1e-12) {
		t.Fatalf("TP forward comm %g, want %g", f1, want)
	}
	// P2P with SP carries s*b*h/t.
	if got := P2PBytes(m, cfg); got != 2048*12288*2/8 {
		t.Fatalf("p2p bytes %g", got)
	}
}

// End-to-end calibration against published measurements is
// TestCalibrationPublishedTables (calibration_test.go), over full tables.

func TestSmallHiddenRunsFarBelowPeak(t *testing.T) {
	c := dgxA100(1)
	small := model.Model{Name: "tiny", NumLayers: 12, Hidden: 256, Heads: 4, SeqLength: 512, Vocab: 51200}
	big := model.Model{Name: "22b", NumLayers: 48, Hidden: 6144, Heads: 64, SeqLength: 2048, Vocab: 51200}
	ps := predictFixed(t, c, small, parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, Recompute: parallel.RecomputeNone})
	pb := predictFixed(t, c, big, parallel.Config{TP: 8, PP: 1, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, SequenceParallel: true, Recompute: parallel.RecomputeNone})
	if ps.TFLOPSPerGPU > 0.5*pb.TFLOPSPerGPU {
		t.Fatalf("h=256 reaches %.0f TFLOP/s, h=6144 %.0f: small models must run far lower", ps.TFLOPSPerGPU, pb.TFLOPSPerGPU)
	}
}

func TestRecomputeCostsTime(t *testing.T) {
	c := dgxA100(2)
	var prev float64
	for _, r := range []parallel.Recompute{parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull} {
		p := predictFixed(t, c, gpt3_175b, parallel.Config{TP: 8, PP: 2, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 16, SequenceParallel: true, Recompute: r})
		if p.IterationSeconds <= prev {
			t.Fatalf("recompute %s: %g s not slower than %g", r, p.IterationSeconds, prev)
		}
		prev = p.IterationSeconds
	}
}

// Property: making every link faster never makes a plan slower.
func TestFasterLinksNeverSlower(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		c := randomCluster(4, 8, seed)
		fast := randomCluster(4, 8, seed)
		fastBW, _ := fast.Matrices()
		for a := range fastBW {
			for b := range fastBW[a] {
				fastBW[a][b] *= 1 + float64((a+b)%3)
			}
		}
		for _, cfg := range []parallel.Config{
			{TP: 2, PP: 4, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, SequenceParallel: true, Recompute: parallel.RecomputeFull},
			{TP: 1, PP: 2, DP: 16, CP: 1, VPP: 2, MicroBatch: 2, GlobalBatch: 128, Recompute: parallel.RecomputeSelective, DistributedOptimizer: true},
		} {
			m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
			slow := predictFixed(t, c, m, cfg)
			quick := predictFixed(t, fast, m, cfg)
			if quick.IterationSeconds > slow.IterationSeconds*(1+1e-12) {
				t.Fatalf("seed %d %+v: faster links %g s > %g s", seed, cfg, quick.IterationSeconds, slow.IterationSeconds)
			}
		}
	}
}

func TestBreakdownSumsToIteration(t *testing.T) {
	c := randomCluster(4, 8, 3)
	p := predictFixed(t, c, gpt3_175b, parallel.Config{TP: 4, PP: 4, DP: 2, CP: 1, VPP: 2, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true, Recompute: parallel.RecomputeFull, DistributedOptimizer: true})
	b := p.Breakdown
	if sum := b.Compute + b.TP + b.PP + b.DP + b.Offload; !approx(sum, p.IterationSeconds, 1e-9) {
		t.Fatalf("breakdown %+v sums to %g, iteration %g", b, sum, p.IterationSeconds)
	}
	if b.Compute <= 0 || b.TP <= 0 || b.PP <= 0 {
		t.Fatalf("breakdown %+v has an empty part", b)
	}
}

// A TP group that spans hosts pays the slowest ring hop: the inter-host
// link shared by the TP ranks crossing it, not NVLink.
func TestTPAcrossHostsUsesInterHostLink(t *testing.T) {
	c := dgxA100(2)
	cfg := parallel.Config{TP: 8, PP: 1, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 2, NumMicroBatches: 1, SequenceParallel: true}
	e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	inside := e.ringLink([]int{0, 0, 0, 0})
	across := e.ringLink([]int{0, 0, 1, 1})
	if inside.BytesPerS != 300e9 {
		t.Fatalf("intra-host ring at %g B/s, want NVSwitch 300e9", inside.BytesPerS)
	}
	// 1600 Gbit/s = 200 GB/s per host, shared by the 8 TP ranks of a block.
	if across.BytesPerS != 200e9/8 || across.LatencyS != 5e-6 {
		t.Fatalf("cross-host ring %+v, want 25e9 B/s and 5 us", across)
	}
	fIn, _ := tpCommPerLayer(gpt3_175b, cfg, inside)
	fOut, _ := tpCommPerLayer(gpt3_175b, cfg, across)
	if fOut < 8*fIn {
		t.Fatalf("TP across hosts %g s per layer, inside %g: want >= 8x (bandwidth ratio 12)", fOut, fIn)
	}
}

// Pipeline send/recv crosses the real link between consecutive stages.
func TestP2PUsesStageLink(t *testing.T) {
	c := testCluster([]islandDef{{hosts: 1, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}, {hosts: 1, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 10)
	cfg := parallel.Config{TP: 8, PP: 2, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, NumMicroBatches: 8, SequenceParallel: true}
	e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	var w stageWork
	e.stage([]int{0, 1}, 0, 0, make([]int, 1), &w, nil)
	// s*b*h/t bf16 = 2048*12288*2/8 bytes over 10 Gbit/s / 8 TP ranks + 50 us.
	want := 2048*12288*2/8/(10e9/8/8) + 50e-6
	if !approx(w.sendNext, want, 1e-12) {
		t.Fatalf("p2p %g s, want %g", w.sendNext, want)
	}
}

// A DP group with 4 members on each of 2 hosts: the hierarchical all-reduce
// moves the same NIC bytes as the flat ring but pays 2 inter-host latency
// steps instead of 14, and is picked when latency dominates.
func TestHierarchicalDPAllReduce(t *testing.T) {
	c := dgxA100(2)
	_, lat := c.Matrices()
	for a := range lat {
		for b := range lat[a] {
			if a != b {
				lat[a][b] = 1e-3 // a slow, high-latency path
			}
		}
	}
	cfg := parallel.Config{TP: 2, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, NumMicroBatches: 1, SequenceParallel: true}
	e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	hosts := []int{0, 0, 0, 0, 1, 1, 1, 1}
	bytes := 1e6
	flat := AllReduceSeconds(bytes, 8, e.ringLink(hosts))
	inter := e.link(0, 1)
	inter.BytesPerS /= 4
	hier := 2*AllGatherSeconds(bytes, 4, e.link(0, 0)) + AllReduceSeconds(bytes/4, 2, inter)
	if hier >= flat {
		t.Fatalf("test setup: hierarchical %g not below flat %g", hier, flat)
	}
	if got := e.dpAllReduceSeconds(bytes, hosts); !approx(got, hier, 1e-12) {
		t.Fatalf("DP all-reduce %g, want hierarchical %g (flat %g)", got, hier, flat)
	}
	if d, k := hostRuns([]int{0, 0, 1, 1, 1}, nil); d != nil || k != 0 {
		t.Fatalf("uneven runs: %v %d", d, k)
	}
}

// Data-parallel wire volume per GPU (with an all-reduce priced at its
// buffer size): Megatron reduces fp32 gradients (4 B/param); with the
// distributed optimizer a fp32 reduce-scatter (2) plus a bf16 parameter
// all-gather (1); DeepSpeed ZeRO-1 reduces 16-bit gradients (2).
func TestDPCommVolumeByFramework(t *testing.T) {
	const p = 1e9
	identity := func(bytes float64) float64 { return bytes }
	for _, tc := range []struct {
		name string
		f    parallel.Framework
		cfg  parallel.Config
		want float64
	}{
		{"megatron ddp", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1}, 4 * p},
		{"megatron distopt", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1, DistributedOptimizer: true}, 3 * p},
		// --grad-reduce-in-bf16: a bf16 reduce-scatter (1); --fp8-param-gather
		// in an FP8 run: an FP8 all-gather (0.5).
		{"megatron distopt grad-reduce-in-bf16", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1, DistributedOptimizer: true,
			LowPrecisionDP: parallel.LowPrecisionDP{GradReduceBF16: true}}, 2 * p},
		{"megatron distopt fp8 param gather", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1, DistributedOptimizer: true, Precision: gpu.PrecisionFP8,
			LowPrecisionDP: parallel.LowPrecisionDP{FP8ParamGather: true}}, 2.5 * p},
		{"megatron distopt both", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1, DistributedOptimizer: true, Precision: gpu.PrecisionFP8,
			LowPrecisionDP: parallel.LowPrecisionDP{FP8ParamGather: true, GradReduceBF16: true}}, 1.5 * p},
		{"megatron ddp grad-reduce-in-bf16", parallel.FrameworkMegatron, parallel.Config{DP: 8, CP: 1,
			LowPrecisionDP: parallel.LowPrecisionDP{GradReduceBF16: true}}, 2 * p},
		{"deepspeed zero1", parallel.FrameworkDeepSpeed, parallel.Config{DP: 8, CP: 1, ZeroStage: 1}, 2 * p},
		{"torch ddp", parallel.FrameworkTorch, parallel.Config{DP: 8, CP: 1}, 4 * p},
	} {
		total, _, _ := dpCommSeconds(tc.cfg, tc.f, p, identity)
		if !approx(total, tc.want, 1e-12) {
			t.Errorf("%s: %g bytes on the wire, want %g", tc.name, total, tc.want)
		}
	}
}

// The tied word-embedding gradient is all-reduced between the first and
// the last stage after the DP reduction. By hand for GPT-3 175B at TP8 PP2
// on two DGX A100 (the host link shared by the 8 TP ranks): each TP rank
// reduces 4 B x 51200/8 x 12288 = 314,572,800 B between 2 ranks, a 2-rank
// ring: 2*(1/2)*bytes/(bw/8) + 2*lat. Untied models and PP = 1 pay nothing.
func TestEmbeddingSyncSeconds(t *testing.T) {
	c := dgxA100(2)
	cfg := memory.Normalized(parallel.Config{TP: 8, PP: 2, DP: 1, MicroBatch: 1, NumMicroBatches: 8, GlobalBatch: 8})
	e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkMegatron)
	l := c.LinkBetween(0, 1)
	bytes := 4.0 * 51200 / 8 * 12288
	want := bytes/(l.BytesPerS/8) + 2*l.LatencyS
	if got := e.embeddingSyncSeconds([]int{0, 1}, &sendScratch{}); !approx(got, want, 1e-12) {
		t.Errorf("across hosts: %g s, want %g", got, want)
	}
	if same := e.embeddingSyncSeconds([]int{0, 0}, &sendScratch{}); same >= want {
		t.Errorf("first and last stage on one host (NVSwitch) %g s, not below across hosts %g", same, want)
	}
	untied := gpt3_175b
	untied.UntieEmbeddings = true
	if got := newPlanEval(c, untied, cfg, parallel.FrameworkMegatron).embeddingSyncSeconds([]int{0, 1}, &sendScratch{}); got != 0 {
		t.Errorf("untied embeddings: %g s, want 0", got)
	}
	cfg1 := memory.Normalized(parallel.Config{TP: 8, PP: 1, DP: 2, MicroBatch: 1, NumMicroBatches: 4, GlobalBatch: 8})
	if got := newPlanEval(c, gpt3_175b, cfg1, parallel.FrameworkMegatron).embeddingSyncSeconds([]int{0, 1}, &sendScratch{}); got != 0 {
		t.Errorf("PP=1: %g s, want 0", got)
	}
}

// --tp-comm-overlap runs each TP collective beside its own GEMM with the
// userbuffers settings (Transformer Engine): the GEMM slows by SMs/(SMs -
// num_sm) under an SM margin and pays a launch per extra split, and only a
// collective longer than its GEMM shows. By hand, and in the evaluator.
func TestTPCommOverlapPricesEachGEMMWithItsCollective(t *testing.T) {
	h100 := gpuH100
	h100.SMs, h100.PeakFP8TFLOPS = 132, 1979
	cv := gpu.CurveOf(h100)
	m := model.Model{Name: "l", NumLayers: 1, Hidden: 16384, Heads: 128, QueryGroups: 8, FFNHidden: 53248, SwiGLU: true, Vocab: 128256, SeqLength: 8192}
	cfg := parallel.Config{TP: 8, CP: 2, MicroBatch: 1, SequenceParallel: true, Precision: gpu.PrecisionFP8}
	s := newLayerShape(m, cfg)
	fast := cluster.Link{BytesPerS: 1e15}
	gemm := gpu.CurveGEMMSeconds(h100, cv, s.prec, 4096, 2304, 16384) // QKV: 4096 tokens, (16384+2*1024)/8 columns
	cases := []struct {
		name string
		ub   parallel.TPOverlapGEMM
		want float64
	}{
		{"margin of 24 SMs on 132", parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk, NumSM: 24, SetSMMargin: true}, gemm * 132 / 108},
		{"bulk without margin", parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk, NumSM: 24}, gemm},
		{"ring exchange: TP chunks", parallel.TPOverlapGEMM{Method: parallel.TPOverlapRingExchange, NumSM: 1}, gemm + 7*gpu.GEMMLaunchS},
		{"pipeline, 4 splits, 16 SMs", parallel.TPOverlapGEMM{Method: parallel.TPOverlapPipeline, NumSM: 16, SetSMMargin: true, NumSplits: 4}, gemm*132/116 + 3*gpu.GEMMLaunchS},
	}
	for _, c := range cases {
		p := tpOverlapPair{gemm: gemmShape{4096, 2304, 16384}, ub: c.ub, gather: true}
		got, own := p.seconds(s, h100, cv, fast, 8)
		if !approx(got, c.want, 1e-12) || own != gemm {
			t.Errorf("%s: %g s (GEMM %g), want %g", c.name, got, own, c.want)
		}
	}
	// A slow link: the collective (a reduce-scatter of 4096 x 16384 bf16
	// over TP 8 at 100 GB/s: 7/8 x 134 MB / 100 GB/s = 1.17 ms) outlasts
	// the GEMM and is what the pair costs; an all-gather in FP8 training
	// moves FP8 (TE's fp8_buf): half of it.
	slow := cluster.Link{BytesPerS: 100e9}
	rs := 7.0 / 8 * 4096 * 16384 * 2 / 100e9
	for _, gather := range []bool{false, true} {
		p := tpOverlapPair{gemm: gemmShape{4096, 2304, 16384}, ub: parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk}, gather: gather}
		want := rs
		if gather {
			want = rs / 2
		}
		if got, _ := p.seconds(s, h100, cv, slow, 8); !approx(got, want, 1e-12) {
			t.Errorf("slow link, all-gather %t: %g s, want the collective's %g", gather, got, want)
		}
	}

	// Llama 3.1 405B at TP 8, CP 2 on DGX H100 (450 GB/s), FP8: a
	// reduce-scatter (bf16, 0.30 ms) outlasts the QKV (0.27 ms) and
	// projection (0.24 ms) GEMMs though the layer's GEMMs (2.6 ms) could
	// hide all four collectives (the lumped max(0, comm - GEMMs) priced
	// none of it); the all-gathers move FP8 (0.15 ms) and hide. The
	// evaluator prices what shows per pair: the projection's forward
	// reduce-scatter and QKV's dgrad reduce-scatter beside its wgrad.
	c := testCluster([]islandDef{{hosts: 1, gpus: 8, gpu: h100, intraGBs: 450, nicGbit: 3200}}, 0)
	link := c.LinkBetween(0, 0)
	cfg = parallel.Config{TP: 8, PP: 1, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 1, NumMicroBatches: 1,
		SequenceParallel: true, Precision: gpu.PrecisionFP8, StageLayers: []int{1}}
	m.SeqLength = 4096 // CP 2's local tokens, without CP's own traffic
	s = newLayerShape(m, cfg)
	rsT := AllGatherSeconds(s.tokens*s.hidden*2, 8, link)
	agT := AllGatherSeconds(s.tokens*s.hidden*1, 8, link)
	qkvT := gpu.CurveGEMMSeconds(h100, cv, s.prec, 4096, 2304, 16384)
	projT := gpu.CurveGEMMSeconds(h100, cv, s.prec, 4096, 16384, 2048)
	l := gpu.GEMMLaunchS
	if rsT <= projT*132/131+7*l || rsT <= qkvT || agT >= projT {
		t.Fatalf("premise: reduce-scatter %g s should outlast QKV %g s and projection %g s, the all-gather %g s not", rsT, qkvT, projT, agT)
	}
	ub := parallel.TPOverlapCfg{}
	for _, u := range []*parallel.TPOverlapGEMM{&ub.QKVFprop, &ub.ProjFprop, &ub.FC1Fprop, &ub.FC2Fprop, &ub.ProjDgrad, &ub.FC2Dgrad} {
		*u = parallel.TPOverlapGEMM{Method: parallel.TPOverlapRingExchange, NumSM: 1}
	}
	ub.ProjFprop.SetSMMargin, ub.FC2Fprop.SetSMMargin = true, true
	for _, u := range []*parallel.TPOverlapGEMM{&ub.QKVDgrad, &ub.QKVWgrad, &ub.FC1Dgrad, &ub.FC1Wgrad} {
		*u = parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk, NumSM: 2}
	}
	cfg.TPCommOverlap, cfg.TPOverlapCfg = true, &ub
	over := newPlanEval(c, m, cfg, parallel.FrameworkMegatron).classes[0]
	// What the hidden pairs still add: every ring exchange 7 extra GEMM
	// launches, FC2's forward 1/131 more (1 SM margin); the bulk pairs
	// without margin nothing. The inputs gathered again for the wgrads
	// are not counted (nor are they without the flag).
	fc2T := gpu.CurveGEMMSeconds(h100, cv, s.prec, 4096, 16384, 53248/8)
	wantF := 7*l + (rsT - projT) + 7*l + (fc2T*132/131 - fc2T + 7*l)
	wantB := 7*l + 7*l + (rsT - qkvT)
	if !approx(over.tpF, wantF, 1e-9) || !approx(over.tpB, wantB, 1e-9) {
		t.Fatalf("overlapped TP comm %g/%g s, want %g/%g s (reduce-scatter %g, QKV %g, projection %g)", over.tpF, over.tpB, wantF, wantB, rsT, qkvT, projT)
	}
}
