package search

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// checkPrecision refuses precisions the run cannot have: fp8 needs FP8
// tensor cores on every GPU (Transformer Engine) and Megatron-LM.
func checkPrecision(c *cluster.Cluster, o Options) error {
	switch o.Fixed.Precision {
	case "", gpu.PrecisionFP16:
		return nil
	case gpu.PrecisionBF16:
		return checkBF16(c, o)
	case gpu.PrecisionFP32:
		return checkFP32(c)
	case gpu.PrecisionFP8:
	default:
		return fmt.Errorf("precision %q: use bf16, fp16, fp8 or fp32", o.Fixed.Precision)
	}
	if o.Framework == parallel.FrameworkDeepSpeed {
		return fmt.Errorf("FP8 training is planned for Megatron-LM with Transformer Engine (--fp8-format hybrid); DeepSpeed plans use bf16 or fp16")
	}
	if missing := gpusWithout(c, func(g gpu.Spec) float64 { return g.PeakFP8TFLOPS }); len(missing) > 0 {
		fix := "plan with --precision bf16"
		if o.PrecisionFromArgs {
			// run has no --precision: the script's flags decide it.
			fix = "the Megatron arguments ask for it with --fp8-format: drop --fp8-format and the other --fp8-* flags (Megatron then trains in the --bf16 or --fp16 they give)"
		}
		return fmt.Errorf("FP8 needs FP8 tensor cores (Hopper, Ada, Blackwell), and %s has none; %s, or give the GPU's peak_fp8_tflops in the cluster file", strings.Join(missing, ", "), fix)
	}
	return nil
}

// checkBF16 refuses a pinned bf16 on GPUs without bf16 arithmetic (Volta,
// Turing: gpu.HasBF16), where the run would fail or crawl; their mixed
// precision is fp16.
func checkBF16(c *cluster.Cluster, o Options) error {
	missing := gpusLacking(c, gpu.HasBF16)
	if len(missing) == 0 {
		return nil
	}
	fix := "plan with --precision fp16"
	if o.PrecisionFromArgs {
		fix = "the Megatron arguments ask for it with --bf16: pass --fp16 instead"
	}
	return fmt.Errorf("bf16 needs bf16 arithmetic (NVIDIA Ampere or later), and %s has none: %s", strings.Join(missing, ", "), fix)
}

// precisionOn is the precision a search plans on c: the pinned one, else
// bf16, or fp16 where a GPU has no bf16 (mixed precision there is fp16).
func precisionOn(c *cluster.Cluster, fixed gpu.Precision) gpu.Precision {
	if fixed == "" && len(gpusLacking(c, gpu.HasBF16)) > 0 {
		return gpu.PrecisionFP16
	}
	return fixed
}

// attentionOn is m as it runs on c: unfused attention, its scores stored,
// where a GPU runs no flash-attention kernel (gpu.HasFlashAttention), for
// the time and the memory model alike.
func attentionOn(c *cluster.Cluster, m model.Model) model.Model {
	if len(gpusLacking(c, gpu.HasFlashAttention)) > 0 {
		m.MaterializedAttention = true
	}
	return m
}

// gpusLacking names, once each, the GPU models of c without has (asked
// once per model: has may look the catalog up).
func gpusLacking(c *cluster.Cluster, has func(gpu.Spec) bool) []string {
	seen := map[string]bool{}
	var missing []string
	for _, h := range c.Hosts {
		if seen[h.GPU.Model] {
			continue
		}
		seen[h.GPU.Model] = true
		if !has(h.GPU) {
			missing = append(missing, h.GPU.Model)
		}
	}
	return missing
}

// checkFP32 refuses fp32 plans on GPUs whose fp32 GEMM rate is unknown.
func checkFP32(c *cluster.Cluster) error {
	if missing := gpusWithout(c, func(g gpu.Spec) float64 { return g.PeakFP32TFLOPS }); len(missing) > 0 {
		return fmt.Errorf("fp32 needs the GPU's fp32 GEMM rate, which the catalog does not have for %s: give peak_fp32_tflops in the cluster file's gpu section (the datasheet's dense TF32 tensor TFLOP/s, or FP32 TFLOP/s on GPUs without TF32)", strings.Join(missing, ", "))
	}
	return nil
}

// gpusWithout names, once each, the GPU models of c whose rate is not set.
func gpusWithout(c *cluster.Cluster, rate func(gpu.Spec) float64) []string {
	var missing []string
	for _, h := range c.Hosts {
		if rate(h.GPU) <= 0 && !slices.Contains(missing, h.GPU.Model) {
			missing = append(missing, h.GPU.Model)
		}
	}
	return missing
}

// precisionOf is the run's precision: the user's, else bf16.
func precisionOf(fx parallel.Constraints) gpu.Precision {
	if fx.Precision == "" {
		return gpu.PrecisionBF16
	}
	return fx.Precision
}

// microBatchChoices are the micro-batch sizes tried for one parallel shape
// (TP, PP, DP, CP in shape): the divisors of the per-replica batch, in
// increasing order, while both hold:
//   - memory: the shape's most frugal setting (full recompute, sequence
//     parallelism, sharded optimizer, offload where allowed) fits; the
//     activations grow with the micro-batch, so no larger one fits either;
//   - a lower bound: the micro-batch's best case, every sample at the
//     model's highest GEMM and attention rate with only the pipeline fill
//     (divided by the most virtual stages) on top, is not slower than
//     micro-batch 1's priced compute with a full 1F1B fill. The best case
//     only grows with the micro-batch (fewer micro-batches, longer fill).
//
// There is no fixed cap: Megatron and DeepSpeed accept any micro-batch
// that divides the batch. A pinned micro-batch is always returned when it
// divides the batch, so it is priced (or reported as not fitting) rather
// than dropped.
func microBatchChoices(c *cluster.Cluster, m model.Model, o Options, shape parallel.Config, maxCap float64) []int {
	if o.GlobalBatch%shape.DP != 0 {
		return nil
	}
	perReplica := o.GlobalBatch / shape.DP
	if fx := o.Fixed.MicroBatch; fx > 0 {
		if perReplica%fx != 0 {
			return nil
		}
		return []int{fx}
	}
	ideal, mb1 := perSampleLayerSeconds(c, m, o, shape)
	vmax := 1.0
	if o.Framework != parallel.FrameworkDeepSpeed && shape.PP > 1 {
		vmax = float64(min(8, m.NumLayers/shape.PP))
	}
	fill := float64(shape.PP - 1)
	worst1 := (float64(perReplica) + fill) * mb1
	var out []int
	for _, mb := range divisors(perReplica, perReplica) {
		if mb > 1 && maxCap > 0 && !frugalFits(m, o, shape, mb, maxCap) {
			break
		}
		if best := (float64(perReplica/mb) + fill/vmax) * float64(mb) * ideal; mb > 1 && best > worst1 {
			break
		}
		out = append(out, mb)
	}
	return out
}

// perSampleLayerSeconds is one decoder layer's forward+backward per sample
// on the cluster's fastest GPU: at the highest rates the model gives
// (ideal) and as priced at micro-batch 1 (mb1).
func perSampleLayerSeconds(c *cluster.Cluster, m model.Model, o Options, shape parallel.Config) (ideal, mb1 float64) {
	cfg := shape
	cfg.MicroBatch, cfg.Precision, cfg.Recompute = 1, precisionOf(o.Fixed), parallel.RecomputeNone
	cfg.SetFixedFlags(o.Fixed)
	cfg.SequenceParallel = shape.TP > 1
	ideal, mb1 = math.Inf(1), math.Inf(1)
	seen := map[gpu.Spec]bool{}
	for _, h := range c.Hosts {
		if seen[h.GPU] {
			continue
		}
		seen[h.GPU] = true
		cv := gpu.CurveOf(h.GPU)
		s := newLayerShape(m, cfg)
		ideal = math.Min(ideal, 3*(s.gemmFLOPs()/gpu.GEMMPeakFLOPS(h.GPU, cv, cfg.Precision)+s.attnFLOPs()/gpu.AttnPeakFLOPS(h.GPU, cv)))
		lc := layerCompute(m, cfg, h.GPU)
		mb1 = math.Min(mb1, lc.Fwd+lc.Bwd)
	}
	return ideal, mb1
}

// frugalFits reports whether the shape's least memory-hungry config with
// micro-batch mb fits GPUs of maxCap bytes.
func frugalFits(m model.Model, o Options, shape parallel.Config, mb int, maxCap float64) bool {
	fx := o.Fixed
	mega := o.Framework != parallel.FrameworkDeepSpeed
	cfg := shape
	cfg.VPP, cfg.MicroBatch, cfg.GlobalBatch = 1, mb, o.GlobalBatch
	cfg.NumMicroBatches = o.GlobalBatch / (mb * shape.DP)
	cfg.Precision = precisionOf(fx)
	cfg.SetFixedFlags(fx)
	cfg.Recompute = parallel.RecomputeFull
	if fx.Recompute != "" {
		cfg.Recompute = fx.Recompute
	}
	cfg.SequenceParallel = mega && shape.TP > 1 && (fx.SequenceParallel == nil || *fx.SequenceParallel)
	switch {
	case mega:
		cfg.DistributedOptimizer = fx.DistributedOptimizer == nil || *fx.DistributedOptimizer
		if cfg.DistributedOptimizer && !fx.NoOffload {
			cfg.Offload.OptimizerFraction = 1
		}
	default:
		cfg.ZeroStage = 3
		if shape.PP > 1 {
			cfg.ZeroStage = 1
		}
		if fx.ZeroStage >= 0 {
			cfg.ZeroStage = fx.ZeroStage
		}
		if !fx.NoOffload && cfg.ZeroStage >= 1 {
			cfg.Offload = parallel.Offload{OptimizerFraction: 1, Params: cfg.ZeroStage == 3}
		}
	}
	cfg.StageLayers = evenLayers(m.NumLayers, cfg.PP)
	_, miss := stageMemory(m, cfg, o.Framework, func(int) float64 { return maxCap })
	return miss <= 0
}
