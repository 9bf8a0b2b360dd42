package plan

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
)

// asIsLayout is the user's own layout for `plan --as-is`: the host order
// ranks fill in torchrun's way and the plan priced on it.
type asIsLayout struct {
	hosts []string // host names in the order ranks fill them
	plan  *search.Plan
	err   error // why the layout could not be priced (shown, not fatal)
}

// restrictToListed keeps only the cluster file's hosts that --hosts or
// --hostfile lists, with a hostfile's slots as GPUs per host (torchrun's
// --nproc-per-node), and returns the listed names in their order. Every
// listed host must be in the cluster file: it is what prices them.
func restrictToListed(f *cluster.File, hosts, hostfile string) ([]string, error) {
	listed, err := remote.ResolveHosts(remote.HostSources{Hosts: hosts, Hostfile: hostfile, Getenv: func(string) string { return "" }})
	if err != nil {
		return nil, err
	}
	slots := map[string]int{}
	var names []string
	for _, h := range listed {
		if _, dup := slots[h.Name]; dup {
			return nil, fmt.Errorf("host %s is listed twice", h.Name)
		}
		slots[h.Name] = h.Slots
		names = append(names, h.Name)
	}
	kept := map[string]bool{}
	for i, is := range f.Clusters {
		perHost := 0
		for _, h := range is.Hosts {
			n, ok := slots[h.Name]
			if !ok {
				continue
			}
			switch {
			case n > is.GPUsPerHost:
				return nil, fmt.Errorf("host %s: %d slots, but island %s has %d GPUs per host", h.Name, n, is.Name, is.GPUsPerHost)
			case n > 0 && perHost > 0 && n != perHost:
				return nil, fmt.Errorf("hosts of island %s list %d and %d slots: give every host of an island the same count", is.Name, perHost, n)
			case n > 0:
				perHost = n
			}
			kept[h.Name] = true
		}
		if perHost > 0 {
			f.Clusters[i].GPUsPerHost = perHost
		}
	}
	var missing []string
	for _, n := range names {
		if !kept[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("host(s) %s are not in the cluster file: probe them (pipette-launch probe --hostfile ...) or fix the names", strings.Join(missing, ", "))
	}
	f.Subset(kept)
	return names, nil
}

// hostOrder maps host names to the resolved cluster's host indices.
func hostOrder(c *cluster.Cluster, names []string) ([]int, error) {
	index := map[string]int{}
	for i, h := range c.Hosts {
		index[h.Name] = i
	}
	order := make([]int, 0, len(names))
	for _, n := range names {
		i, ok := index[n]
		if !ok {
			return nil, fmt.Errorf("host %s is not in the cluster", n)
		}
		order = append(order, i)
	}
	return order, nil
}

// priceAsIs prices the user's layout: the best configuration with the
// user's parallel sizes (the plan flags and the Megatron arguments after
// `--`) with ranks in torchrun's order over names. Knobs the user leaves
// free are chosen best for that layout, so the ratio to the planned one
// understates rather than overstates what the plan saves.
func priceAsIs(c *cluster.Cluster, m model.Model, so search.Options, names []string, megatronArgs []string) asIsLayout {
	out := asIsLayout{hosts: names}
	order, err := hostOrder(c, names)
	if err != nil {
		out.err = err
		return out
	}
	fixed, err := asIsConstraints(so.Fixed, m, so.GlobalBatch, megatronArgs)
	if err != nil {
		out.err = err
		return out
	}
	so.PrecisionFromArgs = fixed.Precision != so.Fixed.Precision
	so.Fixed, so.IgnoreIslands, so.HostOrder, so.TopK = fixed, true, order, 1
	res, err := search.Search(c, m, so)
	if err != nil {
		var nf *search.NoFitError
		if errors.As(err, &nf) {
			err = errors.New(nf.Message)
		}
		out.err = err
		return out
	}
	out.plan = &res.Plans[0]
	return out
}

// asIsConstraints adds the parallel sizes of the user's Megatron arguments
// to the plan flags' constraints; a flag that contradicts them is an error.
func asIsConstraints(flags parallel.Constraints, m model.Model, globalBatch int, args []string) (parallel.Constraints, error) {
	if len(args) == 0 {
		return flags, nil
	}
	// Without the model's shape flags the sizes are read against the
	// planned model's (virtual stages need its layer count).
	full := append(slices.Clone(args), templates.ModelShapeArgs(m, false, args)...)
	_, fromArgs, _, err := megatron.ModelFromArgs(full)
	if err != nil {
		return flags, fmt.Errorf("Megatron arguments after --: %w", err)
	}
	micro, global, err := megatron.BatchArgs(args)
	if err != nil {
		return flags, fmt.Errorf("Megatron arguments after --: %w", err)
	}
	if global > 0 && global != globalBatch {
		return flags, fmt.Errorf("the Megatron arguments' --global-batch-size %d differs from --global-batch-size %d", global, globalBatch)
	}
	fromArgs.MicroBatch = micro
	out := flags
	for _, f := range []struct {
		name      string
		flag, arg int
		dst       *int
	}{
		{"--tp", flags.TP, fromArgs.TP, &out.TP}, {"--pp", flags.PP, fromArgs.PP, &out.PP},
		{"--cp", flags.CP, fromArgs.CP, &out.CP}, {"--vpp", flags.VPP, fromArgs.VPP, &out.VPP},
		{"--micro-batch-size", flags.MicroBatch, fromArgs.MicroBatch, &out.MicroBatch},
	} {
		if f.arg == 0 {
			continue
		}
		if f.flag != 0 && f.flag != f.arg {
			return flags, fmt.Errorf("%s %d contradicts the Megatron arguments' %d", f.name, f.flag, f.arg)
		}
		*f.dst = f.arg
	}
	if out.Recompute == "" {
		out.Recompute = fromArgs.Recompute
	}
	if out.SequenceParallel == nil {
		out.SequenceParallel = fromArgs.SequenceParallel
	}
	if out.DistributedOptimizer == nil {
		out.DistributedOptimizer = fromArgs.DistributedOptimizer
	}
	if out.Precision == "" || out.Precision == gpu.PrecisionBF16 {
		out.Precision = cmp.Or(fromArgs.Precision, out.Precision)
	}
	if out.StageLayers == nil {
		out.StageLayers = slices.Clone(fromArgs.StageLayers)
	}
	out.TPCommOverlap = out.TPCommOverlap || fromArgs.TPCommOverlap
	if out.TPCommOverlap {
		if out.TPOverlapCfg, err = cmdutil.TPOverlapCfgFromArgs(args); err != nil {
			return flags, err
		}
	}
	return out, nil
}

// secondsLabel prints an iteration time with sensible precision.
func secondsLabel(s float64) string {
	switch {
	case s >= 10:
		return fmt.Sprintf("%.1f s", s)
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	}
	return fmt.Sprintf("%.3f s", s)
}

// asIsLine is the one-line comparison under the plan table.
func asIsLine(a asIsLayout, planned *search.Plan) string {
	if a.plan == nil {
		return fmt.Sprintf("your layout (torchrun's rank order on %s): not priced: %v", hostsLabel(a.hosts), a.err)
	}
	p := a.plan
	return fmt.Sprintf("your layout (TP %d PP %d DP %d, torchrun's rank order on %s): %s/iteration; planned: %s (%.2fx)",
		p.TP, p.PP, p.DP, hostsLabel(a.hosts), secondsLabel(p.Predicted.IterationSeconds),
		secondsLabel(planned.Predicted.IterationSeconds), p.Predicted.IterationSeconds/planned.Predicted.IterationSeconds)
}

// hostsLabel lists up to 8 hosts, then how many more.
func hostsLabel(h []string) string {
	if len(h) <= 8 {
		return strings.Join(h, " ")
	}
	return fmt.Sprintf("%s ... (%d hosts)", strings.Join(h[:8], " "), len(h))
}

// asIsJSON is --as-is in `plan --json`.
type asIsJSON struct {
	AsIs        *search.Plan `json:"as_is,omitempty"`
	AsIsHosts   []string     `json:"as_is_host_order"`
	AsIsError   string       `json:"as_is_error,omitempty"`
	AsIsSpeedup float64      `json:"as_is_over_planned,omitempty"`
}

func asIsView(a *asIsLayout, planned *search.Plan) *asIsJSON {
	if a == nil {
		return nil
	}
	v := &asIsJSON{AsIs: a.plan, AsIsHosts: a.hosts}
	if a.err != nil {
		v.AsIsError = a.err.Error()
	}
	if a.plan != nil {
		v.AsIsSpeedup = a.plan.Predicted.IterationSeconds / planned.Predicted.IterationSeconds
	}
	return v
}
