package megatron

import (
	"errors"
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Validate applies the start-up checks of Megatron-LM's
// arguments.py (see shared/reference/megatron-lm.md) to cfg on world GPUs.
func Validate(m model.Model, cfg parallel.Config, world int) error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cfg.TP < 1 || cfg.PP < 1 || cfg.DP < 1 || cfg.CP < 1 || cfg.MicroBatch < 1 || cfg.GlobalBatch < 1 {
		return fmt.Errorf("megatron: tp, pp, dp, cp, micro-batch and global batch must all be >= 1 (got tp=%d pp=%d dp=%d cp=%d mb=%d gbs=%d)",
			cfg.TP, cfg.PP, cfg.DP, cfg.CP, cfg.MicroBatch, cfg.GlobalBatch)
	}
	vpp := max(cfg.VPP, 1)
	if world%(cfg.TP*cfg.PP*cfg.CP) != 0 || cfg.WorldSize() != world {
		bad("world size %d is not tp*pp*cp*dp = %d*%d*%d*%d", world, cfg.TP, cfg.PP, cfg.CP, cfg.DP)
	}
	if m.Heads <= 0 || m.Hidden%m.Heads != 0 {
		bad("hidden size %d not divisible by attention heads %d", m.Hidden, m.Heads)
	}
	if m.Heads%cfg.TP != 0 {
		bad("attention heads %d not divisible by tensor parallel size %d", m.Heads, cfg.TP)
	}
	if g := m.Groups(); g%cfg.TP != 0 && cfg.TP%g != 0 {
		bad("query groups %d and tensor parallel size %d: neither divides the other", g, cfg.TP)
	}
	if cfg.CP > 1 && cfg.Ulysses && (m.SeqLength%cfg.CP != 0 || (m.Heads/cfg.TP)%cfg.CP != 0) {
		// DeepSpeed's all-to-all scatters heads and gathers the sequence.
		bad("DeepSpeed-Ulysses splits the sequence length %d and the %d heads per TP rank over %d ranks: both must divide", m.SeqLength, m.Heads/cfg.TP, cfg.CP)
	}
	if cfg.TPCommOverlap && (cfg.TP <= 1 || !cfg.SequenceParallel) {
		// arguments.py turns sequence parallelism off at TP 1, then asserts
		// it for --tp-comm-overlap.
		bad("%s needs sequence parallelism and tensor parallel size > 1 (got tp=%d, sequence parallel %t)", TPCommOverlapFlag, cfg.TP, cfg.SequenceParallel)
	}
	if cfg.CP > 1 && !cfg.Ulysses && m.SeqLength%(2*cfg.CP) != 0 {
		bad("sequence length %d not divisible by 2*cp = %d", m.SeqLength, 2*cfg.CP)
	}
	if m.MaxPositionEmbeddings > 0 && m.MaxPositionEmbeddings < m.SeqLength {
		bad("max position embeddings %d below sequence length %d", m.MaxPositionEmbeddings, m.SeqLength)
	}
	if cfg.GlobalBatch%(cfg.MicroBatch*cfg.DP) != 0 {
		bad("global batch %d not divisible by micro-batch*dp = %d", cfg.GlobalBatch, cfg.MicroBatch*cfg.DP)
	} else if cfg.NumMicroBatches != cfg.GlobalBatch/(cfg.MicroBatch*cfg.DP) {
		bad("num micro-batches %d, want global/(micro*dp) = %d", cfg.NumMicroBatches, cfg.GlobalBatch/(cfg.MicroBatch*cfg.DP))
	}
	if vpp > 1 {
		if cfg.PP <= 1 {
			bad("interleaved schedule (vpp=%d) needs pipeline parallel size > 1", vpp)
		}
		if cfg.PP > 0 && cfg.NumMicroBatches%cfg.PP != 0 {
			bad("interleaved schedule: micro-batches %d not divisible by pp %d", cfg.NumMicroBatches, cfg.PP)
		}
	}
	validateStageLayers(m, cfg, vpp, bad)
	validateMoE(m, cfg, world, bad)
	switch cfg.Recompute {
	case parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull:
	default:
		bad("recompute %q is not none, selective or full", cfg.Recompute)
	}
	if cfg.ZeroStage != 0 {
		bad("zero stage %d: Megatron-LM has no ZeRO (use the distributed optimizer)", cfg.ZeroStage)
	}
	if cfg.Offload.Params {
		bad("parameter offload is DeepSpeed ZeRO-3 only")
	}
	if f := cfg.Offload.OptimizerFraction; f < 0 || f > 1 {
		bad("optimizer offload fraction %g outside 0..1", f)
	} else if f > 0 && !cfg.DistributedOptimizer {
		bad("--optimizer-cpu-offload needs the precision-aware, distributed optimizer")
	}
	return errors.Join(errs...)
}

// validateMoE applies Megatron-Core's expert-parallel checks:
//   - arguments.py: num_experts % expert_model_parallel_size == 0 ("Number
//     of experts should be a multiple of expert model parallel_size");
//   - parallel_state.initialize_model_parallel: expert_data_parallel_size =
//     world // (ETP*EP*PP), and "world_size is not divisible by
//     expert_tensor_model_pipeline_parallel size" otherwise;
//   - ModelParallelConfig.__post_init__: "When using expert parallelism and
//     tensor parallelism, sequence parallelism must be used";
//   - the expert linear layers split the expert FFN over ETP (divide()).
func validateMoE(m model.Model, cfg parallel.Config, world int, bad func(string, ...any)) {
	ep, etp := cfg.ExpertParallel()
	if !m.IsMoE() {
		if ep > 1 || (cfg.ETP > 0 && cfg.ETP != cfg.TP) {
			bad("expert parallelism (ep=%d etp=%d) needs an MoE model (num_experts > 0)", ep, etp)
		}
		return
	}
	if m.NumExperts%ep != 0 {
		bad("num experts %d not divisible by expert model parallel size %d", m.NumExperts, ep)
	}
	if d := etp * ep * cfg.PP; d > 0 && world%d != 0 {
		bad("world size %d not divisible by expert tensor x expert model x pipeline parallel size %d*%d*%d", world, etp, ep, cfg.PP)
	}
	if ep > 1 && cfg.TP > 1 && !cfg.SequenceParallel {
		bad("expert parallelism (ep=%d) with tensor parallelism (tp=%d) needs sequence parallelism", ep, cfg.TP)
	}
	if m.ExpertFFN()%etp != 0 {
		bad("expert FFN size %d not divisible by expert tensor parallel size %d", m.ExpertFFN(), etp)
	}
}

// validateStageLayers: without a split, layers divide evenly over pp (and
// over pp*vpp virtual stages); an explicit split is rendered as
// --pipeline-model-parallel-layout and only needs every stage non-empty.
func validateStageLayers(m model.Model, cfg parallel.Config, vpp int, bad func(string, ...any)) {
	stages := cfg.PP * vpp
	if len(cfg.StageLayers) == 0 {
		if m.NumLayers%stages != 0 {
			bad("num layers %d not divisible by pp*vpp = %d", m.NumLayers, stages)
		}
		return
	}
	if len(cfg.StageLayers) != stages {
		bad("stage layers has %d entries, want pp*vpp = %d", len(cfg.StageLayers), stages)
		return
	}
	sum := 0
	for i, n := range cfg.StageLayers {
		if n < 1 {
			bad("stage %d has %d layers; every stage needs at least one", i, n)
		}
		sum += n
	}
	if sum != m.NumLayers {
		bad("stage layers sum to %d, model has %d", sum, m.NumLayers)
	}
}
