package planner

import (
	"fmt"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// Pins are the launcher's own pins of what a Megatron-LM script's
// arguments can turn on but not keep off: Megatron has flags for
// recompute, the optimizer's CPU offload and the distributed optimizer,
// none for "none of it". Without a pin the search is free to turn them on
// (for memory or speed), and the launch then says so (scriptKnobsWarning).
type Pins struct {
	// Recompute is --recompute: none, selective or full ("" free).
	Recompute parallel.Recompute
	// NoOffload is --no-offload: never the optimizer's CPU offload;
	// Offload is --offload: only plans with it.
	NoOffload, Offload bool
	// DistributedOptimizer is --distributed-optimizer (nil free).
	DistributedOptimizer *bool
}

// set reports whether any pin is given.
func (p Pins) set() bool {
	return p.Recompute != "" || p.NoOffload || p.Offload || p.DistributedOptimizer != nil
}

// pinFlags are the pins as the launcher's flags spell them.
func (p Pins) flags() string {
	var f []string
	if p.Recompute != "" {
		f = append(f, "--recompute "+string(p.Recompute))
	}
	if p.NoOffload {
		f = append(f, "--no-offload")
	}
	if p.Offload {
		f = append(f, "--offload")
	}
	if p.DistributedOptimizer != nil {
		f = append(f, fmt.Sprintf("--distributed-optimizer=%t", *p.DistributedOptimizer))
	}
	return strings.Join(f, " ")
}

// applyPins adds the launcher's pins to the constraints the script's
// arguments give. They pin a Megatron-LM plan's search only: a DeepSpeed
// job's own config decides offload, and a run without a cluster file runs
// its script as written, so a pin there would change nothing it says.
func applyPins(p Pins, fixed *parallel.Constraints, fw parallel.Framework, planned bool) error {
	if !p.set() {
		return nil
	}
	if fw != parallel.FrameworkMegatron {
		return fmt.Errorf("%s pin a Megatron-LM plan; a %s job's recompute and offload are its own (its DeepSpeed config, its script): drop them", p.flags(), fw)
	}
	if !planned {
		return fmt.Errorf("%s pin the plan's search, and without a cluster file the job runs as its script's arguments say (torchrun's order): give the setting among the script's arguments instead, or plan with --cluster", p.flags())
	}
	if r := p.Recompute; r != "" {
		switch r {
		case parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull:
		default:
			return fmt.Errorf("--recompute %q: want none, selective or full", string(r))
		}
		if fixed.Recompute != "" && fixed.Recompute != r {
			return fmt.Errorf("--recompute %s contradicts the script's arguments (they ask for %s recompute): change one", r, fixed.Recompute)
		}
		fixed.Recompute = r
	}
	switch {
	case p.NoOffload && p.Offload:
		return fmt.Errorf("--no-offload and --offload contradict each other: give one")
	case p.NoOffload && fixed.ForceOffload:
		return fmt.Errorf("--no-offload contradicts the script's --optimizer-cpu-offload: change one")
	}
	fixed.NoOffload = fixed.NoOffload || p.NoOffload
	fixed.ForceOffload = fixed.ForceOffload || p.Offload
	if d := p.DistributedOptimizer; d != nil {
		if fixed.DistributedOptimizer != nil && *fixed.DistributedOptimizer != *d {
			return fmt.Errorf("--distributed-optimizer=%t contradicts the script's --use-distributed-optimizer: change one", *d)
		}
		fixed.DistributedOptimizer = d
	}
	return nil
}

// scriptKnobsWarning names the memory-saving settings a Megatron-LM plan
// turns on that the script's arguments leave off (recompute, the
// optimizer's CPU offload, the distributed optimizer), why (without them
// the plan's layout needs more memory than the GPU leaves by the
// estimate, or it fits and the search ranked them first), and the pins
// that keep the script's settings; "" when the plan turns on none. The
// job then runs differently from the script as written (slower with
// recompute or offload, a sharded optimizer checkpoint with the
// distributed optimizer), so the launch says so, as it does for the
// parallel sizes (sizesBeyondDefaults).
func scriptKnobsWarning(m model.Model, fixed parallel.Constraints, p *search.Plan, headroom float64, planIndex int) string {
	if p.Framework != parallel.FrameworkMegatron {
		return ""
	}
	var what []string
	var keep Pins
	asWritten := p.Config
	if fixed.Recompute == "" && p.Recompute != parallel.RecomputeNone && p.Recompute != "" {
		what = append(what, fmt.Sprintf("%s recompute (%s)", p.Recompute, strings.Join(megatron.RecomputeArgs(p.Recompute), " ")))
		keep.Recompute, asWritten.Recompute = parallel.RecomputeNone, parallel.RecomputeNone
	}
	if !fixed.ForceOffload && p.Offload.OptimizerFraction > 0 {
		what = append(what, fmt.Sprintf("the optimizer's CPU offload (%s)", strings.Join(megatron.OffloadArgs(p.Offload.OptimizerFraction), " ")))
		keep.NoOffload, asWritten.Offload = true, parallel.Offload{}
	}
	if fixed.DistributedOptimizer == nil && p.DistributedOptimizer {
		what = append(what, "the distributed optimizer (--use-distributed-optimizer)")
		off := false
		keep.DistributedOptimizer, asWritten.DistributedOptimizer = &off, false
	}
	if len(what) == 0 {
		return ""
	}
	them := "them"
	if len(what) == 1 {
		them = "it"
	}
	// The plan's fullest stage without them, against the capacity the
	// plan's estimate reports (its fullest stage's GPU, less the headroom):
	// on a cluster of one GPU kind the search's own verdict; on mixed GPUs
	// a stage on a larger one may still fit.
	capacity := p.Memory.GPUCapacityBytes
	need := memory.EstimatePlan(m, asWritten, p.Framework, capacity, 0, 1).PeakBytesPerGPU
	var why string
	if need > capacity {
		why = fmt.Sprintf("without %s, this layout needs %.1f GiB per GPU by the estimate, over the %.1f GiB usable at --memory-headroom %g",
			them, need/gpu.GiB, capacity/gpu.GiB, headroom)
	} else {
		why = fmt.Sprintf("without %s, this layout fits by the estimate (%.1f of %.1f GiB per GPU), and the search ranked the plan with %s first",
			them, need/gpu.GiB, capacity/gpu.GiB, them)
		if planIndex > 1 {
			why = fmt.Sprintf("without %s, this layout fits by the estimate (%.1f of %.1f GiB per GPU); you chose plan %d, which has %s",
				them, need/gpu.GiB, capacity/gpu.GiB, planIndex, them)
		}
	}
	return fmt.Sprintf("the plan turns on %s, which the script's arguments leave off: %s; to keep the script's settings, pass %s to pipette-launch (a plan then keeps them, or the launch says none fits)",
		joinAnd(what), why, keep.flags())
}

// joinAnd joins items as "a", "a and b" or "a, b and c".
func joinAnd(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
