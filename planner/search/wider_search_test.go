package search

import (
	"errors"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

var model22b = model.Model{Name: "22b", NumLayers: 48, Hidden: 6144, Heads: 64, SeqLength: 2048, Vocab: 51200}

func boolp(b bool) *bool { return &b }

// Micro-batches above 8 (Megatron accepts any divisor of the batch) are
// planned and priced when pinned, with TP 8.
func TestPinnedLargeMicroBatchWithTP8(t *testing.T) {
	c := dgxA100(4)
	times := map[int]float64{}
	for _, mb := range []int{8, 16, 32} {
		o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 256, TopK: 3, Seed: 1,
			Fixed: parallel.Constraints{TP: 8, MicroBatch: mb, Recompute: parallel.RecomputeFull, ZeroStage: -1}}
		res, err := Search(c, model22b, o)
		if err != nil {
			t.Fatalf("mb %d: %v", mb, err)
		}
		for _, p := range res.Plans {
			if p.MicroBatch != mb || p.TP != 8 {
				t.Fatalf("mb %d: plan has TP %d mb %d", mb, p.TP, p.MicroBatch)
			}
			if !p.Memory.Fits() || p.Predicted.IterationSeconds <= 0 {
				t.Fatalf("mb %d: plan %+v does not fit or has no time", mb, p.Config)
			}
		}
		times[mb] = res.Plans[0].Predicted.IterationSeconds
		t.Logf("TP8 mb%d: %s, %.3f s, %.1f GiB", mb, shapeKey(res.Plans[0].Config), times[mb], res.Plans[0].Memory.PeakBytesPerGPU/gpu.GiB)
	}
	if times[16] == times[8] || times[32] == times[16] {
		t.Fatalf("micro-batch does not change the price: %v", times)
	}
}

// The unpinned search goes past 8 where memory allows and stops at the
// first micro-batch that cannot fit even fully recomputed.
func TestMicroBatchSearchBoundedByMemory(t *testing.T) {
	c := dgxA100(4)
	small := model.Model{Name: "1.3b", NumLayers: 24, Hidden: 2048, Heads: 16, SeqLength: 8192, Vocab: 51200}
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 4096, Fixed: parallel.Constraints{ZeroStage: -1}}
	cfgs := enumerate(c, small, o, gpuA100.MemoryBytes())
	maxMB := 0
	for _, cfg := range cfgs {
		maxMB = max(maxMB, cfg.MicroBatch)
	}
	if maxMB <= 8 {
		t.Fatalf("largest micro-batch searched is %d; want above the old cap of 8", maxMB)
	}
	// Every micro-batch returned fits in its frugal form; the next divisor
	// (if any) does not.
	shape := parallel.Config{TP: 1, PP: 1, DP: 32, CP: 1}
	mbs := microBatchChoices(c, small, o, shape, gpuA100.MemoryBytes())
	last := mbs[len(mbs)-1]
	next := nextDivisor(4096/32, last)
	if next == 0 {
		t.Fatalf("micro-batches %v: memory never stopped the search", mbs)
	}
	if frugalFits(small, o, shape, next, gpuA100.MemoryBytes()) {
		t.Fatalf("micro-batch %d fits but the search stopped at %d", next, last)
	}
	t.Logf("micro-batches searched for TP1 PP1 DP32: %v", mbs)
}

func nextDivisor(n, after int) int {
	for d := after + 1; d <= n; d++ {
		if n%d == 0 {
			return d
		}
	}
	return 0
}

// A pinned micro-batch that does not divide the batch is reported as
// such, not as a head-divisibility problem.
func TestPinnedMicroBatchErrorNamesTheBatch(t *testing.T) {
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 96, Fixed: parallel.Constraints{TP: 8, MicroBatch: 64, ZeroStage: -1}}
	_, err := Search(dgxA100(4), model22b, o)
	if err == nil || !strings.Contains(err.Error(), "micro-batch") {
		t.Fatalf("err = %v, want one that names the micro-batch", err)
	}
}

// TP 16 on 8-GPU hosts is priced over the NIC when pinned: each TP group
// spans two hosts, and its all-reduces cross them at the hosts' NIC rate.
func TestPinnedTP16AcrossHosts(t *testing.T) {
	c := dgxA100(4)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, TopK: 3, Seed: 1,
		Fixed: parallel.Constraints{TP: 16, MicroBatch: 1, ZeroStage: -1}}
	res, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	if p.TP != 16 || len(p.Placement) != 32 {
		t.Fatalf("plan TP %d with %d ranks", p.TP, len(p.Placement))
	}
	// Ranks 0-15 (one TP group) on two hosts, 8 each, local ranks 0-7.
	perHost := map[int]int{}
	for _, rp := range p.Placement[:16] {
		perHost[rp.HostIndex]++
		if rp.LocalRank < 0 || rp.LocalRank > 7 || rp.GPU != rp.LocalRank {
			t.Fatalf("rank %d: local rank %d GPU %d", rp.Rank, rp.LocalRank, rp.GPU)
		}
	}
	if len(perHost) != 2 {
		t.Fatalf("TP group 0 on hosts %v, want two hosts of 8", perHost)
	}
	// The merged host's TP link is the ring's crossing hop: the host's whole
	// 8x200 Gbit/s (NCCL spreads the ring's channels over every NIC).
	mc, _, err := mergeHosts(c, 2)
	if err != nil {
		t.Fatal(err)
	}
	if l := mc.LinkBetween(0, 0); l.BytesPerS != 200e9 || l.LatencyS != 5e-6 {
		t.Fatalf("cross-host TP link %+v, want 200 GB/s at 5 us", l)
	}
	// Same shape with TP 8 inside hosts: TP communication is cheaper.
	o.Fixed.TP = 8
	r8, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.Predicted.Breakdown.TP <= r8.Plans[0].Predicted.Breakdown.TP {
		t.Fatalf("TP16 over the NIC spends %.3f s in TP, TP8 on NVSwitch %.3f s", p.Predicted.Breakdown.TP, r8.Plans[0].Predicted.Breakdown.TP)
	}
	t.Logf("TP16 across hosts: %.3f s/iter (TP %.3f s); TP8: %.3f s/iter (TP %.3f s)", p.Predicted.IterationSeconds,
		p.Predicted.Breakdown.TP, r8.Plans[0].Predicted.IterationSeconds, r8.Plans[0].Predicted.Breakdown.TP)
	// Unpinned, on InfiniBand, cross-host TP is not searched.
	o.Fixed.TP = 0
	all, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range all.Plans {
		if q.TP > 8 {
			t.Fatalf("unpinned search chose TP %d across hosts on InfiniBand", q.TP)
		}
	}
}

// Cross-host TP is searched without pinning when nothing fits inside hosts.
func TestCrossHostTPSearchedWhenNothingElseFits(t *testing.T) {
	// Two hosts of 2 small GPUs; the model's single layer cannot be split
	// by PP and needs TP 4 to fit.
	c := testCluster([]islandDef{{hosts: 2, gpus: 2, gpu: gpu.Spec{Model: "x", MemoryGiB: 8, PeakTFLOPS: 100, MemoryBandwidthTBPerS: 1}, intraGBs: 50, nicGbit: 400}}, 0)
	m := model.Model{Name: "wide", NumLayers: 1, Hidden: 12288, Heads: 96, SeqLength: 2048, Vocab: 32000}
	res, err := Search(c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 4, Fixed: parallel.Constraints{ZeroStage: -1}})
	if err != nil {
		var nf *NoFitError
		if errors.As(err, &nf) {
			t.Fatalf("no fit even across hosts: %v", err)
		}
		t.Fatal(err)
	}
	if res.Plans[0].TP != 4 {
		t.Fatalf("best plan TP %d, want 4 (across both hosts)", res.Plans[0].TP)
	}
}

// --sequence-parallel off is honoured and priced: more activation memory
// and element-wise work, the same TP bytes.
func TestSequenceParallelOff(t *testing.T) {
	c := dgxA100(1)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 8, TopK: 3, Seed: 1,
		Fixed: parallel.Constraints{TP: 8, MicroBatch: 1, Recompute: parallel.RecomputeSelective, ZeroStage: -1, SequenceParallel: boolp(false)}}
	off, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range off.Plans {
		if p.SequenceParallel {
			t.Fatalf("plan %s has sequence parallelism with --sequence-parallel off", configKey(p.Config))
		}
	}
	o.Fixed.SequenceParallel = nil // auto
	auto, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	on := auto.Plans[0]
	if !on.SequenceParallel {
		t.Fatalf("auto chose no sequence parallelism at TP 8")
	}
	p := off.Plans[0]
	if p.Memory.Breakdown.Activations <= on.Memory.Breakdown.Activations || p.Predicted.IterationSeconds <= on.Predicted.IterationSeconds {
		t.Fatalf("SP off: %.2f GiB activations, %.3f s; on: %.2f GiB, %.3f s", p.Memory.Breakdown.Activations/gpu.GiB,
			p.Predicted.IterationSeconds, on.Memory.Breakdown.Activations/gpu.GiB, on.Predicted.IterationSeconds)
	}
}

// FP8 runs GEMMs at the FP8 rate and keeps FP8 weight copies; it is
// refused on a GPU without FP8 tensor cores.
func TestFP8PlansOnH100(t *testing.T) {
	h100 := gpuH100
	h100.PeakFP8TFLOPS = 1979
	c := testCluster([]islandDef{{hosts: 1, gpus: 8, gpu: h100, intraGBs: 450, nicGbit: 3200}}, 0)
	fixed := parallel.Constraints{TP: 8, PP: 1, MicroBatch: 1, Recompute: parallel.RecomputeNone, ZeroStage: -1, DistributedOptimizer: boolp(true)}
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 8, TopK: 1, Seed: 1, Fixed: fixed}
	bf, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Fixed.Precision = gpu.PrecisionFP8
	f8, err := Search(c, model22b, o)
	if err != nil {
		t.Fatal(err)
	}
	a, b := bf.Plans[0], f8.Plans[0]
	if b.Precision != gpu.PrecisionFP8 || a.Precision != gpu.PrecisionBF16 {
		t.Fatalf("precisions %q / %q", a.Precision, b.Precision)
	}
	speed := a.Predicted.IterationSeconds / b.Predicted.IterationSeconds
	if speed < 1.2 || speed > 2 {
		t.Fatalf("FP8 speed-up %.2fx, want between 1.2x and 2x (GEMMs at twice the rate, attention and the rest not)", speed)
	}
	// FP8 weight copies: 2 bytes per decoder GEMM parameter.
	wantExtra := 2 * (memory.LayerParamsPerGPU(model22b, 8) - 2*6144) * 48
	if got := b.Memory.Breakdown.Weights - a.Memory.Breakdown.Weights; !approx(got, wantExtra, 1e-9) {
		t.Fatalf("FP8 weight copies %.0f bytes, want %.0f", got, wantExtra)
	}
	if _, err := Search(dgxA100(1), model22b, o); err == nil || !strings.Contains(err.Error(), "FP8") {
		t.Fatalf("fp8 on A100: err = %v, want a refusal naming FP8", err)
	}
}

// tflops_per_gpu is model FLOPs; hw_tflops_per_gpu adds recomputation.
func TestHardwareTFLOPSIncludesRecompute(t *testing.T) {
	c := dgxA100(1)
	for _, rc := range []parallel.Recompute{parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull} {
		p := predictFixed(t, c, model22b, parallel.Config{TP: 8, PP: 1, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, SequenceParallel: true, Recompute: rc})
		ratio := p.HWTFLOPSPerGPU / p.TFLOPSPerGPU
		want := HardwareFLOPsPerIteration(model22b, 8, rc) / ModelFLOPsPerIteration(model22b, 8)
		if !approx(ratio, want, 1e-9) || (rc == parallel.RecomputeNone && ratio != 1) || (rc == parallel.RecomputeFull && (ratio < 1.3 || ratio > 1.34)) {
			t.Fatalf("recompute %s: hw/model %.4f, want %.4f", rc, ratio, want)
		}
	}
}

// In `run` the user's Megatron flags decide sequence parallelism and
// precision: no --sequence-parallel means none (never added for them), no
// --bf16/--fp16 means fp32.
func TestUserFlagsDecideSPAndPrecision(t *testing.T) {
	base := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048",
		"--max-position-embeddings", "2048", "--vocab-size", "51200", "--tensor-model-parallel-size", "2"}
	cases := []struct {
		extra []string
		sp    bool
		prec  gpu.Precision
	}{
		// No half-precision flag: Megatron trains in fp32 (issue 22).
		{nil, false, gpu.PrecisionFP32},
		{[]string{"--sequence-parallel", "--bf16"}, true, gpu.PrecisionBF16},
		{[]string{"--fp16"}, false, gpu.PrecisionFP16},
		{[]string{"--bf16", "--fp8-format", "hybrid", "--fp8-amax-history-len", "1024"}, false, gpu.PrecisionFP8},
	}
	for _, tc := range cases {
		_, fx, found, err := megatron.ModelFromArgs(append(append([]string{}, base...), tc.extra...))
		if err != nil || !found {
			t.Fatalf("%v: found=%v err=%v", tc.extra, found, err)
		}
		if fx.SequenceParallel == nil || *fx.SequenceParallel != tc.sp || fx.Precision != tc.prec {
			t.Fatalf("%v: sequence parallel %v, precision %q; want %v, %q", tc.extra, fx.SequenceParallel, fx.Precision, tc.sp, tc.prec)
		}
	}
}

// Issue 22: TP16 over two 8xA100 hosts with 4x200 Gbit/s InfiniBand
// measured about twice TP8's iteration time on the same GPUs. Source:
// vTrain (Bang et al., MICRO'24), VIA-Research/vTrain
// data/ground_truth_multi.csv at commit
// f8dda8473a48b373b1d25f51f52d685bff5150c5: Megatron-DeepSpeed (its data/README.md; priced here as Megatron) on A100 hosts of 8
// GPUs, 800 Gbit/s between hosts (its config/validation/multi files:
// inter_node_bandwidth 800, node_size 8, use_checkpoint true), global batch
// 512 (3.6B, 64 GPUs) and 1024 (18.4B, 256 GPUs), PP 1. Each pair below is
// the same model, GPUs and micro-batch, TP8 with DP = GPUs/8 against TP16
// with half the DP, measured in ms (CSV rows copied unchanged but for
// their order: parameters, GPUs, global batch, micro-batch, hidden, heads,
// layers, sequence, TP, DP, PP, iteration ms):
//
//	3.6,64,512,4,3072,32,30,2048,8,8,1,5618      3.6,64,512,4,3072,32,30,2048,16,4,1,11960.1   2.13x
//	3.6,64,512,8,3072,32,30,2048,8,8,1,5178      3.6,64,512,8,3072,32,30,2048,16,4,1,10894     2.10x
//	3.6,64,512,16,3072,32,30,2048,8,8,1,5017.8   3.6,64,512,16,3072,32,30,2048,16,4,1,10719.3  2.14x
//	3.6,64,512,32,3072,32,30,2048,8,8,1,4972.3   3.6,64,512,32,3072,32,30,2048,16,4,1,10580.6  2.13x
//	18.4,256,1024,2,6144,48,40,2048,8,32,1,10453.3  18.4,256,1024,2,6144,48,40,2048,16,16,1,20414.8  1.95x
//
// From vTrain's own files (testdata/published/vtrain_a100.tsv, which scores
// all 109 rows, cites them): vocabulary 50257 (src/config.py) and unfused
// attention (its replica of the measured model, src/model/gpt_modeling.py:
// baddbmm, FusedScaleMaskSoftmax, bmm). Assumed where the source is silent:
// no distributed optimizer or sequence parallelism (the defaults of 2023). An earlier version of this test compared
// TP16 on two hosts with TP8 on one at the same batch (twice the GPUs for
// TP16), which is not what was measured, and read 1.01x as optimistic.
// The predicted ratio must fall within 1.6-2.5x (measured 1.95-2.14x), and
// each iteration within 20% of the measurement.
func TestTP16AcrossHostsMatchesVTrain(t *testing.T) {
	m36 := model.Model{Name: "3.6b", NumLayers: 30, Hidden: 3072, Heads: 32, SeqLength: 2048, Vocab: 50257, MaterializedAttention: true}
	m184 := model.Model{Name: "18.4b", NumLayers: 40, Hidden: 6144, Heads: 48, SeqLength: 2048, Vocab: 50257, MaterializedAttention: true}
	for _, tc := range []struct {
		m               model.Model
		gpus, batch, mb int
		tp8ms, tp16ms   float64
	}{
		{m36, 64, 512, 4, 5618, 11960.1},
		{m36, 64, 512, 8, 5178, 10894},
		{m36, 64, 512, 16, 5017.8, 10719.3},
		{m36, 64, 512, 32, 4972.3, 10580.6},
		{m184, 256, 1024, 2, 10453.3, 20414.8},
	} {
		c := testCluster([]islandDef{{hosts: tc.gpus / 8, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800}}, 0)
		var it [2]float64
		for i, tp := range []int{8, 16} {
			o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: tc.batch, TopK: 1, Seed: 1,
				Fixed: parallel.Constraints{TP: tp, PP: 1, DP: tc.gpus / tp, CP: 1, VPP: 1, MicroBatch: tc.mb, ZeroStage: -1,
					Recompute: parallel.RecomputeFull, DistributedOptimizer: boolp(false), SequenceParallel: boolp(false), NoOffload: true}}
			r, err := Search(c, tc.m, o)
			if err != nil {
				t.Fatal(err)
			}
			it[i] = r.Plans[0].Predicted.IterationSeconds
		}
		meas := [2]float64{tc.tp8ms / 1000, tc.tp16ms / 1000}
		ratio := it[1] / it[0]
		t.Logf("%s mb %d: TP8 %.2f s (measured %.2f), TP16 %.2f s (measured %.2f): %.2fx (measured %.2fx)",
			tc.m.Name, tc.mb, it[0], meas[0], it[1], meas[1], ratio, meas[1]/meas[0])
		if ratio < 1.6 || ratio > 2.5 {
			t.Errorf("%s mb %d: TP16 across hosts priced at %.2fx TP8's iteration; measured %.2fx", tc.m.Name, tc.mb, ratio, meas[1]/meas[0])
		}
		for i := range it {
			if e := it[i]/meas[i] - 1; e < -0.2 || e > 0.2 {
				t.Errorf("%s mb %d TP%d: predicted %.2f s, measured %.2f s (%+.0f%%)", tc.m.Name, tc.mb, 8<<i, it[i], meas[i], 100*e)
			}
		}
	}
}
