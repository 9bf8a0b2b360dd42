package memory

import (
	"math"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// offloadModel has P = 101,852,160 parameters on one TP/PP rank (worked out
// in TestEstimateStageMemoryHandComputed); with DP=8 a rank owns
// Po = 12,731,520 of them.
var offloadModel = model.Model{NumLayers: 4, Hidden: 1024, Heads: 16, SeqLength: 1024, Vocab: 50257}

// dgxLike: 8 GPUs on PCIe gen4 (25 GB/s, two GPUs per switch -> 12.5 GB/s
// each), 200 GB/s DRAM shared by 8 ranks (25 GB/s each), 64 cores (8 each).
var dgxLike = cluster.Host{GPUs: 8, PCIeBytesPerS: 25e9, HostMemBytesPerS: 200e9, CPUCores: 64}

func TestEstimateOffloadHandComputed(t *testing.T) {
	const cpuMem = 12731520 * 30 / 25e9 // memory bound 0.015277824 s > compute 0.00477 s
	cases := []struct {
		name string
		f    parallel.Framework
		cfg  parallel.Config
		host cluster.Host
		want OffloadCost
	}{
		{
			// grads down 2 B x Po x 4 micro-batches + params up 2 B x Po
			// = 127,315,200 B at 12.5 GB/s; exposed: CPU step + upload.
			"deepspeed zero2 offload", parallel.FrameworkDeepSpeed,
			parallel.Config{DP: 8, ZeroStage: 2, NumMicroBatches: 4, Offload: parallel.Offload{OptimizerFraction: 1}}, dgxLike,
			OffloadCost{PCIeSeconds: 127315200 / 12.5e9, CPUAdamSeconds: cpuMem, ExposedSeconds: cpuMem + 25463040/12.5e9},
		},
		{
			// fp32 grads down once (4 B x Po) + bf16 params up (2 B x Po)
			// = 76,389,120 B; copies overlap the CPU step: max of the two.
			"megatron distributed optimizer offload", parallel.FrameworkMegatron,
			parallel.Config{DP: 8, DistributedOptimizer: true, NumMicroBatches: 4, Offload: parallel.Offload{OptimizerFraction: 1}}, dgxLike,
			OffloadCost{PCIeSeconds: 76389120 / 12.5e9, CPUAdamSeconds: cpuMem, ExposedSeconds: cpuMem},
		},
		{
			// plus 2 B x 2 (forward, backward) x P/8 x 4 micro-batches of
			// parameter fetches = 203,704,320 B, all exposed.
			"deepspeed zero3 param offload", parallel.FrameworkDeepSpeed,
			parallel.Config{DP: 8, ZeroStage: 3, NumMicroBatches: 4, Offload: parallel.Offload{OptimizerFraction: 1, Params: true}}, dgxLike,
			OffloadCost{PCIeSeconds: 331019520 / 12.5e9, CPUAdamSeconds: cpuMem, ExposedSeconds: cpuMem + 229167360/12.5e9},
		},
		{
			// 2 cores for 8 ranks: at least one core each, compute bound
			// Po x 12 / 4 GFLOP/s = 0.03819456 s; a 4-GPU host has its own
			// 25 GB/s link per GPU and 50 GB/s DRAM per rank.
			"compute-bound CPU, 4-GPU host", parallel.FrameworkMegatron,
			parallel.Config{DP: 8, DistributedOptimizer: true, Offload: parallel.Offload{OptimizerFraction: 1}},
			cluster.Host{GPUs: 4, PCIeBytesPerS: 25e9, HostMemBytesPerS: 200e9, CPUCores: 2},
			OffloadCost{PCIeSeconds: 76389120 / 25e9, CPUAdamSeconds: 12731520 * 12 / 4e9, ExposedSeconds: 12731520 * 12 / 4e9},
		},
		{
			"half the optimizer offloaded", parallel.FrameworkMegatron,
			parallel.Config{DP: 8, DistributedOptimizer: true, Offload: parallel.Offload{OptimizerFraction: 0.5}}, dgxLike,
			OffloadCost{PCIeSeconds: 76389120 / 2 / 12.5e9, CPUAdamSeconds: cpuMem / 2, ExposedSeconds: cpuMem / 2},
		},
		{"no offload", parallel.FrameworkDeepSpeed, parallel.Config{DP: 8, ZeroStage: 2}, dgxLike, OffloadCost{}},
	}
	for _, c := range cases {
		got := EstimateOffload(offloadModel, c.cfg, c.f, c.host, 8)
		if !relClose(got.PCIeSeconds, c.want.PCIeSeconds, 1e-9) || !relClose(got.CPUAdamSeconds, c.want.CPUAdamSeconds, 1e-9) ||
			!relClose(got.ExposedSeconds, c.want.ExposedSeconds, 1e-9) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

// TestEstimateOffloadWorstRank: with PP the rank holding the most
// parameters sets the cost; for tied GPT-3 13B that is the last rank (the
// embedding copy plus the final norm), ahead of the first and far ahead of
// the middle ones.
func TestEstimateOffloadWorstRank(t *testing.T) {
	m, _ := model.Preset("gpt3-13b")
	cfg := parallel.Config{TP: 1, PP: 4, DP: 2, ZeroStage: 1, NumMicroBatches: 8, Offload: parallel.Offload{OptimizerFraction: 1}}
	worst := EstimateOffload(m, cfg, parallel.FrameworkDeepSpeed, dgxLike, 8)
	for r := range 4 {
		c := EstimateOffloadRank(m, cfg, parallel.FrameworkDeepSpeed, dgxLike, 8, r)
		if c.ExposedSeconds > worst.ExposedSeconds {
			t.Errorf("rank %d exposes %g s > reported worst %g s", r, c.ExposedSeconds, worst.ExposedSeconds)
		}
	}
	last := EstimateOffloadRank(m, cfg, parallel.FrameworkDeepSpeed, dgxLike, 8, 3)
	middle := EstimateOffloadRank(m, cfg, parallel.FrameworkDeepSpeed, dgxLike, 8, 1)
	if last != worst || middle.ExposedSeconds >= worst.ExposedSeconds {
		t.Errorf("worst %+v, last rank %+v, middle %+v", worst, last, middle)
	}
}

// TestOffloadIssue6Scenario prints and bounds the cost for issue 6's case
// (13B, one host of 4 x A100 40GB PCIe gen4, 150 GB/s DRAM, 64 cores):
// ZeRO-3 with the whole optimizer on the CPU. Each rank steps 3.25B
// parameters: 3.25e9 x 30 B / 37.5 GB/s = 2.6 s of CPU Adam.
func TestOffloadIssue6Scenario(t *testing.T) {
	m, _ := model.Preset("gpt3-13b")
	h := cluster.Host{GPUs: 4, PCIeBytesPerS: cluster.PCIeEffectiveBytesPerS(4), HostMemBytesPerS: 150e9, CPUCores: 64}
	cfg := parallel.Config{DP: 4, ZeroStage: 3, MicroBatch: 1, NumMicroBatches: 16, Offload: parallel.Offload{OptimizerFraction: 1}}
	c := EstimateOffload(m, cfg, parallel.FrameworkDeepSpeed, h, 4)
	p := StageParameters(m, cfg, 0) / 4
	if want := p * 30 / 37.5e9; !relClose(c.CPUAdamSeconds, want, 1e-9) {
		t.Errorf("CPU Adam %g s, want %g s", c.CPUAdamSeconds, want)
	}
	if c.ExposedSeconds < c.CPUAdamSeconds || c.ExposedSeconds > 10 {
		t.Errorf("exposed %g s outside [CPU Adam %g, 10]", c.ExposedSeconds, c.CPUAdamSeconds)
	}
	t.Logf("13B ZeRO-3 optimizer offload on 4xA100-40GB: PCIe %.2f s, CPU Adam %.2f s, exposed %.2f s per iteration",
		c.PCIeSeconds, c.CPUAdamSeconds, c.ExposedSeconds)
}

func TestOffloadMonotoneInFraction(t *testing.T) {
	m, _ := model.Preset("llama2-7b")
	prev := 0.0
	for _, frac := range []float64{0, 0.25, 0.5, 1} {
		cfg := parallel.Config{DP: 4, DistributedOptimizer: true, Offload: parallel.Offload{OptimizerFraction: frac}}
		c := EstimateOffload(m, cfg, parallel.FrameworkMegatron, dgxLike, 8)
		if c.ExposedSeconds < prev || math.IsNaN(c.ExposedSeconds) {
			t.Errorf("fraction %g: exposed %g < %g", frac, c.ExposedSeconds, prev)
		}
		prev = c.ExposedSeconds
	}
}
