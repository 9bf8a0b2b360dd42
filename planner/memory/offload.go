package memory

import (
	"math"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Offload cost model (per iteration, per rank). The seed study (deepspeed.md)
// found the two costs that matter: PCIe traffic between GPU and host, and
// the CPU optimizer step, which is bound by host memory bandwidth.
const (
	// gpusPerPCIeSwitch: 8-GPU servers (DGX/HGX A100 and H100) hang two
	// GPUs off each PCIe switch, so two ranks share one x16 uplink; smaller
	// hosts are assumed to give each GPU its own link.
	gpusPerPCIeSwitch = 2
	// cpuAdamBytesPerParam is the DRAM traffic of one CPU Adam update:
	// read fp32 grad, param, m, v (16 B), write param, m, v (12 B) and the
	// 16-bit copy sent back to the GPU (2 B).
	cpuAdamBytesPerParam = 30
	// cpuAdamFLOPsPerParam: moment updates, bias corrections, sqrt,
	// division and weight decay, about a dozen operations.
	cpuAdamFLOPsPerParam = 12
	// cpuFLOPsPerCore is what one core sustains on that mix with SIMD
	// (sqrt and division are far below FMA peak): a few GFLOP/s.
	cpuFLOPsPerCore = 4e9
)

// OffloadCost is the per-iteration cost of CPU offload for one rank.
type OffloadCost struct {
	PCIeSeconds    float64 // gradients down + parameters up over PCIe
	CPUAdamSeconds float64 // optimizer step on the host's CPU
	// ExposedSeconds is what stays on the critical path after the overlap
	// the framework achieves.
	ExposedSeconds float64
}

// offloadTraffic is one rank's host<->GPU bytes per iteration.
type offloadTraffic struct {
	gradsDown, paramsUp, paramFetch float64
}

// offloadedParams is how many of this rank's parameters the CPU updates.
func offloadedParams(m model.Model, cfg parallel.Config, f parallel.Framework, ppRank int) float64 {
	shards := 1.0
	if (f == parallel.FrameworkMegatron && cfg.DistributedOptimizer) || (f == parallel.FrameworkDeepSpeed && cfg.ZeroStage >= 1) {
		shards = optimizerShards(cfg)
	}
	return StageParameters(m, cfg, ppRank) / shards * clamp01(cfg.Offload.OptimizerFraction)
}

// traffic: Megatron moves fp32 main grads down (4 B) once per iteration
// and bf16 params up (2 B). DeepSpeed ZeRO-Offload moves 16-bit grads down
// after every micro-batch's backward (it accumulates on the CPU) and 16-bit
// params up after the step; with ZeRO-3 parameter offload every
// micro-batch's forward and backward fetch the rank's 16-bit partition.
func traffic(m model.Model, cfg parallel.Config, f parallel.Framework, ppRank int) offloadTraffic {
	po := offloadedParams(m, cfg, f, ppRank)
	if f != parallel.FrameworkDeepSpeed {
		return offloadTraffic{gradsDown: 4 * po, paramsUp: 2 * po}
	}
	mb := float64(numMicroBatches(cfg))
	t := offloadTraffic{gradsDown: 2 * po * mb, paramsUp: 2 * po}
	if cfg.ZeroStage >= 3 && cfg.Offload.Params {
		t.paramFetch = 2 * 2 * StageParameters(m, cfg, ppRank) / optimizerShards(cfg) * mb
	}
	return t
}

// pcieBytesPerSPerRank is one GPU's share of its host link.
func pcieBytesPerSPerRank(h cluster.Host, ranksPerHost int) float64 {
	share := 1
	if h.GPUs >= 8 {
		share = min(gpusPerPCIeSwitch, max(1, ranksPerHost))
	}
	return h.PCIeBytesPerS / float64(share)
}

// cpuAdamSeconds is the slower of the memory-bandwidth and compute bounds,
// with DRAM bandwidth and cores split over the ranks stepping at once.
func cpuAdamSeconds(params float64, h cluster.Host, ranksPerHost int) float64 {
	n := float64(max(1, ranksPerHost))
	mem := params * cpuAdamBytesPerParam / (h.HostMemBytesPerS / n)
	cores := math.Max(1, float64(h.CPUCores)/n)
	compute := params * cpuAdamFLOPsPerParam / (cores * cpuFLOPsPerCore)
	return math.Max(mem, compute)
}

// EstimateOffloadRank is EstimateOffload for one pipeline rank.
//
// Overlap: DeepSpeed overlaps the gradient copies with backward
// (overlap_comm) but the CPU step and the parameter upload wait for each
// other and for the next iteration, so both are exposed; parameter fetches
// of ZeRO-3 offload_param are counted as exposed too (PCIe, not compute,
// bounds them). Megatron with --overlap-cpu-optimizer-d2h-h2d pipelines
// the copies with the CPU step by parameter group, exposing the slower of
// the two.
func EstimateOffloadRank(m model.Model, cfg parallel.Config, f parallel.Framework, h cluster.Host, ranksPerHost, ppRank int) OffloadCost {
	cfg = WithStages(m, cfg)
	if cfg.Offload.OptimizerFraction <= 0 && !cfg.Offload.Params {
		return OffloadCost{}
	}
	tr := traffic(m, cfg, f, ppRank)
	bw := pcieBytesPerSPerRank(h, ranksPerHost)
	c := OffloadCost{
		PCIeSeconds:    (tr.gradsDown + tr.paramsUp + tr.paramFetch) / bw,
		CPUAdamSeconds: cpuAdamSeconds(offloadedParams(m, cfg, f, ppRank), h, ranksPerHost),
	}
	if f == parallel.FrameworkDeepSpeed {
		c.ExposedSeconds = c.CPUAdamSeconds + (tr.paramsUp+tr.paramFetch)/bw
	} else {
		c.ExposedSeconds = math.Max(c.CPUAdamSeconds, (tr.gradsDown+tr.paramsUp)/bw)
	}
	return c
}

// EstimateOffload returns the offload cost of cfg for one rank on host h
// shared by ranksPerHost ranks: the pipeline rank with the largest exposed
// time, since the slowest rank holds up the iteration. Zero when cfg
// offloads nothing.
func EstimateOffload(m model.Model, cfg parallel.Config, f parallel.Framework, h cluster.Host, ranksPerHost int) OffloadCost {
	cfg = WithStages(m, cfg)
	var worst OffloadCost
	for r := range cfg.PP {
		if c := EstimateOffloadRank(m, cfg, f, h, ranksPerHost, r); c.ExposedSeconds > worst.ExposedSeconds {
			worst = c
		}
	}
	return worst
}
