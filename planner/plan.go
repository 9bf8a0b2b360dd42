package planner

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// OnFabric plans on the cluster priced for transport t, the way the job's
// NCCL settings will carry it, and is the one place that decides which
// transport a plan is priced on. resolve gives the cluster priced for a
// transport; plan plans on it and returns its result and the plan the job
// would run. Under fabric.TransportIslands (one network per communicator
// type) a job across islands keeps RDMA inside islands only if its groups
// allow it: fallback says why they do not ("" when they do; the renderer
// decides, see templates.IslandsFallback), and then the cluster is priced
// on sockets everywhere and planned again, as the job will run. ahead,
// when not nil, is that fallback known before planning, when it does not
// depend on the plan (templates.IslandsFallbackAhead): then the cluster is
// priced on sockets at once, and planned once instead of twice (issue 23:
// the first search doubled plan's time on three islands).
func OnFabric[R any](t fabric.Transport, resolve func(fabric.Transport) (*cluster.Cluster, error),
	plan func(*cluster.Cluster) (R, *search.Plan, error), fallback func(*cluster.Cluster, *search.Plan) string,
	ahead func(*cluster.Cluster) string) (*cluster.Cluster, R, error) {
	var none R
	c, err := resolve(t)
	if err != nil {
		return nil, none, err
	}
	islands := t == fabric.TransportIslands && len(c.Islands) > 1
	if !islands || ahead == nil || ahead(c) == "" {
		res, best, err := plan(c)
		if err != nil || !islands || best == nil || fallback(c, best) == "" {
			return c, res, err
		}
	}
	if c, err = resolve(fabric.TransportSockets); err != nil {
		return nil, none, err
	}
	res, _, err := plan(c)
	return c, res, err
}

// CheckFixedSizes names the user's own parallel size when it cannot work
// for model m on gpus GPUs, before a search reports only that nothing is
// valid. The message names Megatron's flag.
func CheckFixedSizes(m model.Model, f parallel.Constraints, gpus int) error {
	tp, pp, cp := max(f.TP, 1), max(f.PP, 1), max(f.CP, 1)
	switch {
	case m.Heads%tp != 0:
		return fmt.Errorf("--tensor-model-parallel-size %d does not divide --num-attention-heads %d: Megatron needs heads %% TP == 0", tp, m.Heads)
	case m.Groups()%tp != 0 && tp%m.Groups() != 0:
		return fmt.Errorf("--tensor-model-parallel-size %d and --num-query-groups %d: one must divide the other", tp, m.Groups())
	case tp*pp*cp > gpus:
		return fmt.Errorf("TP %d x PP %d x CP %d needs %d GPUs, the cluster has %d", tp, pp, cp, tp*pp*cp, gpus)
	case f.PP > 0 && m.NumLayers < f.PP:
		return fmt.Errorf("--pipeline-model-parallel-size %d is more than the %d layers", f.PP, m.NumLayers)
	}
	if f.DeepSpeedMoE && m.IsMoE() {
		return checkDeepSpeedEP(f, gpus)
	}
	return nil
}

// checkDeepSpeedEP names Megatron-DeepSpeed's --moe-expert-parallel-size
// when DeepSpeed's groups.py would refuse it for every plan: the EP groups
// are consecutive ranks of a pipeline stage (TP x DP x SP of them), or with
// --enable-expert-tensor-parallelism ranks of one data-parallel group. A
// size free in f is taken at 1, the most that divides by EP.
func checkDeepSpeedEP(f parallel.Constraints, gpus int) error {
	tp, pp, cp, ep := max(f.TP, 1), max(f.PP, 1), max(f.CP, 1), max(f.EP, 1)
	if f.ExpertTP {
		if dp := gpus / (tp * pp * cp); dp%ep != 0 {
			return fmt.Errorf("%s %d does not divide the data-parallel size %d (%d GPUs / TP %d / PP %d / SP %d): with %s DeepSpeed builds the expert-parallel groups inside the data-parallel group (utils/groups.py asserts dp_world_size %% ep_size == 0)",
				megatron.DSExpertParallelFlag, ep, dp, gpus, tp, pp, cp, megatron.DSExpertTPFlag)
		}
		return nil
	}
	if stage := gpus / pp; stage%ep != 0 {
		return fmt.Errorf("%s %d does not divide the %d ranks of a pipeline stage (%d GPUs / PP %d): DeepSpeed builds the expert-parallel groups from consecutive data-parallel ranks inside a stage (utils/groups.py asserts (world / pp) %% ep_size == 0)",
			megatron.DSExpertParallelFlag, ep, stage, gpus, pp)
	}
	return nil
}

// TorchrunOrder places ranks host by host, local rank = GPU, as torchrun
// and DeepSpeed do, with TP/PP/CP as fixed says (default 1), micro and
// global batch as given (micro default 1, global default micro x DP), and
// the ZeRO stage, recompute, layer split and offload fixed gives;
// offloadParams also offloads parameters (DeepSpeed's offload_param). It
// returns the plan and a one-line summary.
func TorchrunOrder(c *cluster.Cluster, fw parallel.Framework, fixed parallel.Constraints, micro, global int, offloadParams bool) (*search.Plan, string, error) {
	dp, err := TorchrunDP(c, fixed)
	if err != nil {
		return nil, "", err
	}
	world := c.TotalGPUs()
	tp, pp, cp := max(fixed.TP, 1), max(fixed.PP, 1), max(fixed.CP, 1)
	micro = max(micro, 1)
	if global == 0 {
		global = micro * dp
	}
	cfg := parallel.Config{TP: tp, PP: pp, DP: dp, CP: cp, Ulysses: fixed.Ulysses, VPP: max(fixed.VPP, 1), MicroBatch: micro, GlobalBatch: global,
		NumMicroBatches: global / (micro * dp), ZeroStage: max(fixed.ZeroStage, 0), Recompute: fixed.Recompute, StageLayers: fixed.StageLayers}
	cfg.SetFixedFlags(fixed)
	if fixed.SequenceParallel != nil {
		cfg.SequenceParallel = *fixed.SequenceParallel
	}
	if fixed.DistributedOptimizer != nil {
		cfg.DistributedOptimizer = *fixed.DistributedOptimizer
	}
	if fixed.ForceOffload {
		cfg.Offload.OptimizerFraction = 1
	}
	cfg.Offload.Params = offloadParams
	p := &search.Plan{Framework: fw, Config: cfg}
	for hi, h := range c.Hosts {
		for l := range h.GPUs {
			p.Placement = append(p.Placement, search.RankPlacement{Rank: len(p.Placement), Host: h.Name, HostIndex: hi, LocalRank: l, GPU: l})
		}
	}
	return p, fmt.Sprintf("torchrun rank order (no planning): %d ranks on %d host(s), TP %d PP %d %s %d DP %d", world, len(c.Hosts), tp, pp, seqSplitName(cfg), cp, dp), nil
}

// TorchrunDP is the data-parallel size of torchrun's order on c: every GPU
// a rank, divided by the TP x PP x CP that fixed gives (default 1); an
// error when fixed pins another DP (planner.Job.DP).
func TorchrunDP(c *cluster.Cluster, fixed parallel.Constraints) (int, error) {
	world := c.TotalGPUs()
	tp, pp, cp := max(fixed.TP, 1), max(fixed.PP, 1), max(fixed.CP, 1)
	if world%(tp*pp*cp) != 0 {
		return 0, fmt.Errorf("world size %d is not divisible by the script's TP %d x PP %d x %s %d = %d (Megatron refuses it too: its model-parallel groups must tile the ranks)", world, tp, pp, seqSplitName(parallel.Config{Ulysses: fixed.Ulysses}), cp, tp*pp*cp)
	}
	dp := world / (tp * pp * cp)
	if fixed.DP > 0 && dp != fixed.DP {
		return 0, fmt.Errorf("torchrun's rank order on these hosts gives DP %d (%d ranks / TP x PP x CP %d), not the DP %d asked for", dp, world, tp*pp*cp, fixed.DP)
	}
	return dp, nil
}

// seqSplitName names a config's sequence-splitting ranks in summaries: CP
// (Megatron-LM's context parallelism) or SP (DeepSpeed-Ulysses).
func seqSplitName(c parallel.Config) string {
	if c.Ulysses {
		return "SP"
	}
	return "CP"
}
