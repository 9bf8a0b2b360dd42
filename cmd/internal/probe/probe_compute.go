package probe

import (
	"context"
	"fmt"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/probe/measure"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

// measureCompute runs the compute sweep on every probed host: one worker
// per GPU, or per --nproc-per-node slot on GPU-less hosts (whose CPU
// threads are shared out among the slots, as torchrun's OMP rule does).
func measureCompute(ctx context.Context, opts *Options, runner func(remote.HostTarget) remote.Runner, targets []remote.HostTarget,
	probes []*probe.HostProbe, progress *progress.Line) (*cluster.MeasuredCompute, error) {
	if opts.ComputeSeconds <= 0 {
		return nil, nil
	}
	var model *model.Model
	if opts.Model != "" {
		m, err := cmdutil.LoadModel(opts.Model, 0)
		if err != nil {
			return nil, probeInputError{fmt.Errorf("probe: %w", err)}
		}
		model = &m
	}
	hosts := make([]measure.ComputeHost, 0, len(targets))
	for i, t := range targets {
		hp := probes[i]
		o := measure.ComputeOptions{Python: opts.Python, BudgetSeconds: opts.ComputeSeconds, CUDA: len(hp.GPUs) > 0, Workers: len(hp.GPUs)}
		if !o.CUDA {
			o.Workers = max(opts.NProcPerNode, 1)
		}
		o.Threads = max(1, hp.CPUCores/o.Workers)
		if model != nil {
			o.Shapes = measure.ModelComputeShapes(*model, o.Workers)
		} else {
			o.Shapes = measure.DefaultComputeShapes(o.CUDA)
		}
		hosts = append(hosts, measure.ComputeHost{Name: t.Name, Runner: runner(t), Options: o})
	}
	mc, err := measure.MeasureCompute(ctx, hosts, progress)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	return mc, nil
}
