package search

import (
	"fmt"
	"math"
	"slices"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/schedule"
)

// Timeline is one iteration of a placed plan as the latency model sees it:
// the slowest pipeline's forward and backward ops from the event
// simulator, the pipeline transfers between them, each stage's exposed
// data-parallel reduction after its last backward, then the optimizer step
// and the exposed offload time. IterationSeconds equals the plan's
// predicted iteration time.
type Timeline struct {
	Stages, VPP, MicroBatches int
	// Pipeline is the data-parallel replica drawn (the slowest one).
	Pipeline  int
	Ops       []TimelineOp
	Transfers []Transfer
	// Reduce[r] is stage r's exposed DP reduction and tied-embedding
	// all-reduce, from its last backward (over every replica) on.
	Reduce    []Span
	Optimizer Span
	Offload   Span
	// Makespan is the drawn pipeline's last backward.
	Makespan         float64
	IterationSeconds float64
	// Hosts[r] is the host of stage r in the drawn pipeline (its first
	// CP rank's).
	Hosts []string
}

// TimelineOp is one forward or backward of a model chunk for one
// micro-batch; Recompute is the part of a backward spent recomputing the
// forward (selective or full recomputation).
type TimelineOp struct {
	schedule.Event
	Layers    int
	Recompute float64
}

// Transfer is one pipeline send: activations forward or gradients back,
// from the producing op's end over the link between the two stages.
type Transfer struct {
	From, To, Chunk, Micro int
	Backward               bool
	Start, End             float64
}

// Span is an interval of seconds from the iteration's start.
type Span struct{ Start, End float64 }

// PlanTimeline runs the schedule simulator on a placed plan with tracing on.
// It prices every pipeline exactly as the search's prediction does and
// draws the one with the longest makespan.
func PlanTimeline(c *cluster.Cluster, m model.Model, p *Plan) (*Timeline, error) {
	return planTimeline(c, m, p, p.Config, false)
}

// planTimeline simulates plan p's placement with cfg (p's own config or a
// what-if variant of its schedule) under Megatron's schedules or the wave.
func planTimeline(c *cluster.Cluster, m model.Model, p *Plan, cfg parallel.Config, wave bool) (*Timeline, error) {
	c, p = OnUsedHosts(c, p)
	blockHost, err := blockHostsOf(c, p)
	if err != nil {
		return nil, err
	}
	e := newPlanEvalKind(c, attentionOn(c, m), cfg, p.Framework, wave)
	nm := e.cfg.NumMicroBatches
	if nm <= 0 {
		return nil, fmt.Errorf("timeline: plan has no micro-batch count")
	}
	hosts := make([]int, 0, e.dp*e.cp+e.cp)
	var ss sendScratch
	sends := e.blockSends(blockHost, &ss)
	perMB := make([]float64, e.p)
	for r := range perMB {
		_, perMB[r] = e.dpExposed(blockHost, r, 0, hosts[:0])
	}
	finish := make([]float64, e.p)
	lastBwd := make([]float64, e.p)
	var crit schedule.Result
	var critPT schedule.Times
	critD := 0
	work := make([]stageWork, e.p)
	for d := 0; d < e.dp; d++ {
		pt := schedule.Times{MicroBatches: nm, Link: make([]float64, e.p), Trace: true, Wave: wave}
		for r := 0; r < e.p; r++ {
			w := &work[r]
			e.stage(blockHost, r, d, hosts[:e.cp], w, sends)
			f, b := slices.Clone(w.fwd), slices.Clone(w.bwd)
			if perMB[r] > 0 {
				b[len(b)-1] += math.Max(0, perMB[r]-dpOverlapEfficiency*w.total)
			}
			pt.Fwd, pt.Bwd = append(pt.Fwd, f), append(pt.Bwd, b)
			pt.Link[r] = math.Max(w.sendNext, w.sendWr)
			if d == 0 || w.lastBwd < lastBwd[r] {
				lastBwd[r] = w.lastBwd
			}
		}
		res, err := schedule.Simulate(pt)
		if err != nil {
			return nil, fmt.Errorf("timeline: %w", err)
		}
		for r := range finish {
			finish[r] = math.Max(finish[r], res.Finish[r])
		}
		if d == 0 || res.Makespan > crit.Makespan {
			crit, critPT, critD = res, pt, d
		}
	}
	t := &Timeline{Stages: e.p, VPP: e.v, MicroBatches: nm, Pipeline: critD, Makespan: crit.Makespan}
	t.Ops = e.timelineOps(blockHost, critD, crit.Events)
	t.Transfers = timelineTransfers(crit.Events, critPT, e.p, e.v)
	iter := 0.0
	emb := e.embeddingSyncSeconds(blockHost, &ss)
	t.Reduce = make([]Span, e.p)
	t.Hosts = make([]string, e.p)
	for r := 0; r < e.p; r++ {
		x, _ := e.dpExposed(blockHost, r, lastBwd[r], hosts[:0])
		if r == 0 || r == e.p-1 {
			x += emb
		}
		t.Reduce[r] = Span{finish[r], finish[r] + x}
		iter = math.Max(iter, finish[r]+x)
		t.Hosts[r] = c.Hosts[blockHost[e.block(r, critD, 0)]].Name
	}
	t.Optimizer = Span{iter, iter + e.optSec}
	off := e.offloadSeconds(blockHost)
	t.Offload = Span{t.Optimizer.End, t.Optimizer.End + off}
	t.IterationSeconds = t.Offload.End
	return t, nil
}

// blockHostsOf recovers each TP block's host from the plan's placement
// (global rank = block*TP + tp rank, blocks in Megatron's order).
func blockHostsOf(c *cluster.Cluster, p *Plan) ([]int, error) {
	tp := max(p.TP, 1)
	n := p.WorldSize() / tp
	if len(p.Placement) != p.WorldSize() {
		return nil, fmt.Errorf("timeline: plan places %d ranks, its config has %d", len(p.Placement), p.WorldSize())
	}
	bh := make([]int, n)
	for _, rp := range p.Placement {
		if rp.HostIndex < 0 || rp.HostIndex >= len(c.Hosts) {
			return nil, fmt.Errorf("timeline: rank %d on host index %d, the cluster has %d hosts", rp.Rank, rp.HostIndex, len(c.Hosts))
		}
		if rp.Rank%tp == 0 {
			bh[rp.Rank/tp] = rp.HostIndex
		}
	}
	return bh, nil
}

// timelineOps adds each op's layer count and recomputation share.
func (e *planEval) timelineOps(blockHost []int, d int, ev []schedule.Event) []TimelineOp {
	ops := make([]TimelineOp, len(ev))
	for i, x := range ev {
		layers := e.cfg.StageLayers[x.Chunk*e.p+x.Rank]
		op := TimelineOp{Event: x, Layers: layers}
		if x.Backward {
			// The slowest of the stage's CP ranks sets its pace (as in stage).
			hc := e.class(blockHost[e.block(x.Rank, d, 0)])
			for c := 1; c < e.cp; c++ {
				if y := e.class(blockHost[e.block(x.Rank, d, c)]); y.layerTotal > hc.layerTotal {
					hc = y
				}
			}
			op.Recompute = float64(layers) * recomputeSeconds(hc.layer, e.cfg.Recompute)
		}
		ops[i] = op
	}
	return ops
}

// recomputeSeconds is the forward work a backward repeats per layer.
func recomputeSeconds(l computeCost, r parallel.Recompute) float64 {
	switch r {
	case parallel.RecomputeFull:
		return l.Fwd
	case parallel.RecomputeSelective:
		return l.attnFwd
	}
	return 0
}

// timelineTransfers lists the sends the simulated ops waited on: each
// op's input comes from the op that dependencyReady names.
func timelineTransfers(ev []schedule.Event, pt schedule.Times, p, v int) []Transfer {
	type key struct {
		r, c, i int
		b       bool
	}
	end := make(map[key]float64, len(ev))
	for _, x := range ev {
		end[key{x.Rank, x.Chunk, x.Micro, x.Backward}] = x.End
	}
	link := func(r int) float64 {
		if r < len(pt.Link) {
			return pt.Link[r]
		}
		return 0
	}
	var out []Transfer
	k := schedule.Kind{Wave: pt.Wave}
	for _, x := range ev {
		op := schedule.Op{Backward: x.Backward, Chunk: x.Chunk, Micro: x.Micro}
		from, c, back, hop, ok := schedule.Producer(op, x.Rank, p, v, k)
		if !ok || hop < 0 {
			continue
		}
		start := end[key{from, c, x.Micro, back}]
		out = append(out, Transfer{From: from, To: x.Rank, Chunk: c, Micro: x.Micro, Backward: x.Backward, Start: start, End: start + link(hop)})
	}
	return out
}
