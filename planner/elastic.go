package planner

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// searchElastic plans a DeepSpeed job whose config has an enabled
// elasticity section. The section takes the batch out of the plan's
// hands: DeepSpeedConfig replaces train_batch_size,
// train_micro_batch_size_per_gpu and gradient_accumulation_steps with
// compute_elastic_config's for its world size, the data-parallel size
// (DeepSpeed v0.14.4 runtime/config.py: the mpu's DP when the job has
// model parallelism, else every rank). So each data-parallel size the
// section starts with, up to the cluster's GPUs (only j.DP when an elastic
// restart pins it), is searched with its own micro-batch and global batch
// (find), and the plans are merged, fastest per sample first: the same
// batch for every size of a version 0.1 section (and of version 0.2's
// list), whose per-sample order is the iteration time's. The script's own
// --micro-batch-size and --global-batch-size, when given, must be the
// section's at the size planned. Where the search may leave hosts idle,
// idleWhy says why in the section's terms; an elastic line that no
// accepted size uses whole is planned again with idle hosts allowed by its
// caller (cmd/internal/run planWithIdleHosts, which keeps MIN hosts).
func searchElastic(c *cluster.Cluster, j Job, fixed parallel.Constraints, micro, global int, ch *Choice, find func(fx parallel.Constraints, global int) ([]search.Plan, error)) ([]search.Plan, error) {
	e := j.DS.Elastic
	sizes, err := e.Sizes(c.TotalGPUs())
	if err != nil {
		return nil, fmt.Errorf("%s %s: no data-parallel size on these %d GPUs starts: %w", j.DS.Flag, j.DS.Path, c.TotalGPUs(), err)
	}
	var plans []search.Plan
	var tried []string
	var searched *search.Result
	var lastErr error
	for _, sz := range sizes {
		switch {
		case fixed.DP > 0 && sz.DP != fixed.DP,
			micro > 0 && sz.Micro != micro,
			global > 0 && sz.Train != global:
			continue
		}
		fx := fixed
		fx.DP, fx.MicroBatch = sz.DP, sz.Micro
		tried = append(tried, fmt.Sprintf("DP %d (batch %d, micro %d)", sz.DP, sz.Train, sz.Micro))
		got, err := find(fx, sz.Train)
		if err != nil {
			lastErr = err
			continue
		}
		if len(got) > 0 && (searched == nil || perSample(got[0]) < perSample(searched.Plans[0])) {
			searched = ch.Searched // find recorded this size's search
		}
		plans = append(plans, got...)
	}
	if len(tried) == 0 {
		return nil, fmt.Errorf("%s %s: its elasticity section gives %s; none is the script's%s: make them agree, or leave the batch to the section",
			j.DS.Flag, j.DS.Path, describeSizes(sizes), scriptBatch(micro, global))
	}
	if len(plans) == 0 {
		if lastErr == nil {
			lastErr = errors.New("no plan fits")
		}
		return nil, fmt.Errorf("no plan at a data-parallel size DeepSpeed's elasticity section starts with (%s): %w", joinMax(tried, 6), lastErr)
	}
	idleWhy(plans, sizes, c.TotalGPUs())
	slices.SortStableFunc(plans, func(a, b search.Plan) int { return cmp.Compare(perSample(a), perSample(b)) })
	if k := max(10, j.PlanIndex); len(plans) > k {
		plans = plans[:k]
	}
	r := *searched
	r.Plans = plans
	ch.Searched = &r
	return plans, nil
}

// idleWhy says why a plan leaves hosts idle in the section's terms (the
// search's own reason names the DP as if the user had pinned it): no
// size the section starts with has a layout on every GPU, or one on fewer
// is faster per sample than the best on every GPU.
func idleWhy(plans []search.Plan, sizes []deepspeed.ElasticSize, total int) {
	var whole *search.Plan
	for i := range plans {
		if plans[i].Idle == nil && (whole == nil || perSample(plans[i]) < perSample(*whole)) {
			whole = &plans[i]
		}
	}
	for i := range plans {
		idle := plans[i].Idle
		if idle == nil {
			continue
		}
		used := total - idle.GPUs
		if whole == nil {
			idle.Reason = fmt.Sprintf("no data-parallel size DeepSpeed's elasticity section starts with (%s) has a layout on all %d GPUs; planned on %d", sizeList(sizes), total, used)
		} else {
			idle.Reason = fmt.Sprintf("DP %d on %d GPUs is faster per sample than the best plan on all %d (DP %d, %.3g s for its batch of %d)", plans[i].DP, used, total, whole.DP, whole.Predicted.IterationSeconds, whole.GlobalBatch)
		}
	}
}

// perSample is a plan's predicted time per sample of its global batch.
func perSample(p search.Plan) float64 {
	return p.Predicted.IterationSeconds / float64(max(p.GlobalBatch, 1))
}

// describeSizes names the sizes and batches an elasticity section gives.
func describeSizes(sizes []deepspeed.ElasticSize) string {
	var s []string
	for _, sz := range sizes {
		s = append(s, fmt.Sprintf("DP %d: batch %d, micro %d", sz.DP, sz.Train, sz.Micro))
	}
	return joinMax(s, 6)
}

// sizeList lists the sizes' data-parallel sizes.
func sizeList(sizes []deepspeed.ElasticSize) string {
	var s []string
	for _, sz := range sizes {
		s = append(s, strconv.Itoa(sz.DP))
	}
	return strings.Join(s, ", ")
}

// scriptBatch names the script's batch values that constrain the section.
func scriptBatch(micro, global int) string {
	s := ""
	if micro > 0 {
		s += fmt.Sprintf(" --micro-batch-size %d", micro)
	}
	if global > 0 {
		s += fmt.Sprintf(" --global-batch-size %d", global)
	}
	return s
}

// joinMax joins at most n items, saying how many more there are.
func joinMax(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}
