package search

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

// fittedGPUs are the GPU models whose published runs the compute curves
// were fitted to (docs/cost-model.md, "Fitted curves"): every other GPU is
// priced with its generation's curve at its datasheet rates only.
var fittedGPUs = []string{"A100-80GB-SXM", "A100-40GB-SXM", "H100-SXM"}

// Assumptions says what a prediction of plan p for m on c leans on that the
// model does not see or was not fitted to: the attention kernel it priced
// (fused flash attention unless the model says materialized_attention, or
// the plan is fp32, for which no flash kernel exists), for fp32 plans the
// TF32 rate and DeepSpeed's engine cost, and every GPU whose
// rates come only from a datasheet and a curve fitted to other GPUs, when
// calibrated is false (no `calibrate` run and no `probe --measure` in the
// cluster file).
func Assumptions(c *cluster.Cluster, m model.Model, p *Plan, calibrated bool) []string {
	var out []string
	switch {
	case p != nil && p.Precision == gpu.PrecisionFP32:
		out = append(out, "attention priced unfused (materialized scores): fp32 has no flash-attention kernel")
	case len(gpusLacking(c, gpu.HasFlashAttention)) > 0:
		out = append(out, fmt.Sprintf("attention priced unfused (materialized scores): %s runs no flash-attention kernel (FlashAttention-2 and Transformer Engine's fused attention need NVIDIA Ampere or later)", strings.Join(gpusLacking(c, gpu.HasFlashAttention), ", ")))
	case m.MaterializedAttention:
		out = append(out, "attention priced unfused (materialized scores), as the model file says (materialized_attention: true)")
	default:
		out = append(out, "attention priced as a fused flash-attention kernel; if the job runs it unfused (Megatron-DeepSpeed without --use-flash-attn, --transformer-impl local without a fused backend) add materialized_attention: true to the model file: unfused attention takes 15-25% more time on these models")
	}
	if p != nil && p.Precision == gpu.PrecisionFP32 {
		// PyTorch >= 1.12 runs fp32 matmuls without TF32 by default
		// (torch.backends.cuda.matmul.allow_tf32 = False): the catalog's
		// fp32 rate is the TF32 tensor rate, several times the plain one.
		if tf32 := tf32GPUs(c); len(tf32) > 0 {
			out = append(out, fmt.Sprintf("fp32 GEMMs on %s priced at the TF32 tensor-core rate (peak_fp32_tflops): PyTorch >= 1.12 uses TF32 for matmuls only when the script sets torch.backends.cuda.matmul.allow_tf32 = True (HF Trainer: --tf32 True) or the container enables it; without it they run at the plain FP32 rate, several times slower: give that rate as peak_fp32_tflops in the cluster file's gpu section", strings.Join(tf32, ", ")))
		}
		if e := engineLayerCost(p.Framework, p.Config); e.Fwd+e.Bwd > 0 {
			out = append(out, fmt.Sprintf("DeepSpeed's pipeline engine in fp32 priced at %.2f ms per layer and micro-batch (fitted on Sailor's GH200 runs; docs/cost-model.md)", 1e3*(e.Fwd+e.Bwd)))
		}
	}
	if calibrated {
		return out
	}
	if u := unfittedGPUs(c); len(u) > 0 {
		out = append(out, fmt.Sprintf("%s: compute priced from datasheet rates with a curve fitted to other GPUs' runs (%s); run `pipette-launch calibrate` after a job, or `probe --measure`, to correct it",
			strings.Join(u, ", "), strings.Join(fittedGPUs, ", ")))
	}
	return out
}

// catalogName is the catalog's name for a host's GPU (its own name when
// the catalog has none).
func catalogName(g gpu.Spec) string {
	if e, ok := gpu.Lookup(g.Model); ok {
		return e.Model
	}
	return g.Model
}

// tf32GPUs are c's GPU models whose fp32 rate is a TF32 rate, once each.
func tf32GPUs(c *cluster.Cluster) []string {
	var out []string
	for _, h := range c.Hosts {
		spec, _, _ := gpu.Resolve(h.GPU)
		if name := catalogName(h.GPU); gpu.TF32(spec) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// unfittedGPUs are c's GPU models the compute curves were not fitted to.
func unfittedGPUs(c *cluster.Cluster) []string {
	var unfitted []string
	for _, h := range c.Hosts {
		if name := catalogName(h.GPU); !slices.Contains(fittedGPUs, name) && !slices.Contains(unfitted, name) {
			unfitted = append(unfitted, name)
		}
	}
	return unfitted
}
