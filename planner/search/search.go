package search

import (
	"encoding/binary"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/schedule"
)

const (
	defaultTopK = 10
)

func validate(m model.Model, cfg parallel.Config, f parallel.Framework, world int) error {
	if f == parallel.FrameworkDeepSpeed {
		return deepspeed.Validate(m, cfg, world)
	}
	return megatron.Validate(m, cfg, world)
}

// NoFitError says by how much the closest plan misses and what would help.
type NoFitError struct {
	BestMissBytes float64
	Suggestions   []string
	Message       string
}

func (e *NoFitError) Error() string { return e.Message }

func divisors(n, limit int) []int {
	var out []int
	for d := 1; d <= n && d <= limit; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func pick(fixed int, all []int) []int {
	if fixed <= 0 {
		return all
	}
	if slices.Contains(all, fixed) {
		return []int{fixed}
	}
	return nil
}

// enumerate lists every config of the framework that passes its start-up
// checks on world GPUs, before memory and offload.
func enumerate(c *cluster.Cluster, m model.Model, o Options, maxCap float64) []parallel.Config {
	world := c.TotalGPUs()
	perHost := 0
	for _, h := range c.Hosts {
		perHost = gcd(perHost, h.GPUs)
	}
	fx := o.Fixed
	mega := o.Framework != parallel.FrameworkDeepSpeed
	cps := []int{1}
	if mega && m.SeqLength >= 8192 {
		cps = []int{1, 2, 4}
	}
	if (mega || fx.Ulysses) && fx.CP > 0 { // an explicit --cp (or Ulysses size) is tried whatever the length
		cps = []int{fx.CP}
	}
	recomputes := []parallel.Recompute{parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull}
	if fx.Recompute != "" {
		recomputes = []parallel.Recompute{fx.Recompute}
	}
	var out []parallel.Config
	for _, tp := range pick(fx.TP, divisors(perHost, perHost)) {
		for _, cp := range pick(fx.CP, cps) {
			if world%(tp*cp) != 0 {
				continue
			}
			// Any PP up to the layer count: a split that is not even is
			// rendered for both frameworks (Megatron's pipeline layout,
			// DeepSpeed's PIPETTE_PIPELINE_LAYERS; templates).
			for _, pp := range pick(fx.PP, divisors(world/(tp*cp), m.NumLayers)) {
				dp := world / (tp * cp * pp)
				if fx.DP > 0 && fx.DP != dp {
					continue
				}
				for _, mb := range microBatchChoices(c, m, o, parallel.Config{TP: tp, PP: pp, DP: dp, CP: cp}, maxCap) {
					nmb := o.GlobalBatch / (mb * dp)
					for _, split := range stageSplits(m, pp, nmb, mega, fx.VPP) {
						vpp := split.vpp
						for _, rc := range recomputes {
							for _, opt := range optimizerChoices(o.Framework, pp, fx) {
								cfg := parallel.Config{TP: tp, PP: pp, DP: dp, CP: cp, Ulysses: fx.Ulysses, VPP: vpp, MicroBatch: mb,
									GlobalBatch: o.GlobalBatch, NumMicroBatches: nmb, Recompute: rc,
									SequenceParallel: mega && tp > 1, ZeroStage: opt.zero, DistributedOptimizer: opt.distOpt}
								if fx.SequenceParallel != nil && tp > 1 {
									cfg.SequenceParallel = *fx.SequenceParallel
								}
								cfg.Precision = precisionOf(fx)
								cfg.SetFixedFlags(fx)
								cfg.StageLayers = slices.Clone(split.layers)
								if len(fx.StageLayers) > 0 {
									if len(fx.StageLayers) != pp*vpp {
										continue
									}
									cfg.StageLayers = slices.Clone(fx.StageLayers)
								}
								for _, x := range expertChoices(m, cfg, fx) {
									cfg.EP, cfg.ETP = x[0], x[1]
									cfg.DropTokensTP = fx.DeepSpeedMoE && tp > 1 && cfg.ETP == 1
									if validate(m, cfg, o.Framework, world) == nil {
										out = append(out, cfg)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// expertChoices are the (EP, ETP) pairs tried for an MoE model: every EP
// that divides the experts and fits the TP x CP x DP ranks of a stage,
// with ETP = TP (Megatron's default) or 1 (experts unsplit, the
// Megatron-Bridge recipes' choice), or what the user pinned. Dense models
// get (0, 0), or nothing when EP > 1 is pinned (their ETP has no effect).
func expertChoices(m model.Model, cfg parallel.Config, fx parallel.Constraints) [][2]int {
	if !m.IsMoE() {
		if fx.EP > 1 { // expert parallelism asked of a dense model: nothing is valid
			return nil
		}
		return [][2]int{{0, 0}}
	}
	stage := cfg.TP * cfg.CP * cfg.DP
	etps := []int{cfg.TP}
	switch {
	case fx.ExpertTP: // Megatron-DeepSpeed's --enable-expert-tensor-parallelism
	case cfg.TP > 1:
		etps = append(etps, 1)
	}
	var out [][2]int
	for _, etp := range pick(fx.ETP, etps) {
		for _, ep := range pick(fx.EP, divisors(m.NumExperts, m.NumExperts)) {
			// An EP group must be whole TP blocks or lie inside one (the
			// placement prices the all-to-all per block).
			g := ep * etp
			if stage%g == 0 && (g%cfg.TP == 0 || cfg.TP%g == 0) {
				out = append(out, [2]int{ep, etp})
			}
		}
	}
	return out
}

// stageSplit is one way of splitting the layers over pp ranks: vpp
// virtual stages per rank, layers per virtual stage.
type stageSplit struct {
	vpp    int
	layers []int
}

// minBubbleGain: more virtual stages are searched only while the
// pipeline bubble they could still remove is at least this share of the
// iteration (see stageSplits).
const minBubbleGain = 0.01

// stageSplits are the splits tried for pp ranks: no interleaving, layers
// as even as they go; with Megatron's interleaved schedule (nmb a multiple
// of pp), every virtual-stage count Megatron-LM accepts for the layers
// (megatron.VirtualSplits: the embedding and loss accounted as layers
// where the layers alone do not divide), or the pinned one. Searched
// counts stop once the bubble left, (pp-1)/(vpp x nmb) of the ideal time
// under the interleaved schedule, is under minBubbleGain: more virtual
// stages cannot gain more than that and only add transfers between ranks.
func stageSplits(m model.Model, pp, nmb int, mega bool, fixed int) []stageSplit {
	all := []stageSplit{{vpp: 1, layers: evenLayers(m.NumLayers, pp)}}
	if mega && pp > 1 && nmb%pp == 0 {
		prev := 1
		for _, s := range megatron.VirtualSplits(m.NumLayers, pp) {
			if fixed > 0 && s.VPP != fixed {
				continue
			}
			if fixed <= 0 && float64(pp-1)/float64(prev*nmb) < minBubbleGain {
				break
			}
			layers, err := s.StageLayers(m.NumLayers)
			if err == nil {
				all = append(all, stageSplit{vpp: s.VPP, layers: layers})
				prev = s.VPP
			}
		}
	}
	if fixed <= 0 {
		return all
	}
	var out []stageSplit
	for _, s := range all {
		if s.vpp == fixed {
			out = append(out, s)
		}
	}
	return out
}

type optChoice struct {
	zero    int
	distOpt bool
}

func optimizerChoices(f parallel.Framework, pp int, fx parallel.Constraints) []optChoice {
	var all []optChoice
	if f == parallel.FrameworkDeepSpeed {
		for z := 0; z <= 3; z++ {
			if z >= 2 && pp > 1 {
				continue
			}
			all = append(all, optChoice{zero: z})
		}
	} else {
		all = []optChoice{{}, {distOpt: true}}
	}
	var out []optChoice
	for _, c := range all {
		if fx.ZeroStage >= 0 && f == parallel.FrameworkDeepSpeed && c.zero != fx.ZeroStage {
			continue
		}
		if fx.DeepSpeedMoE && !fx.MoEParamGroup && c.zero > 0 {
			continue // DeepSpeed's ZeRO needs the experts in a parameter group of their own
		}
		if fx.DistributedOptimizer != nil && c.distOpt != *fx.DistributedOptimizer {
			continue
		}
		out = append(out, c)
	}
	return out
}

// offloadChoices are the offload settings tried for a config: none unless
// memory needs it (or the user forces offload).
func offloadChoices(f parallel.Framework, cfg parallel.Config, fx parallel.Constraints, needed bool) []parallel.Offload {
	var out []parallel.Offload
	if !fx.ForceOffload {
		out = append(out, parallel.Offload{})
	}
	if fx.NoOffload || (!needed && !fx.ForceOffload) {
		return out
	}
	switch {
	case f == parallel.FrameworkDeepSpeed && cfg.ZeroStage == 3:
		out = append(out, parallel.Offload{OptimizerFraction: 1}, parallel.Offload{OptimizerFraction: 1, Params: true})
	case f == parallel.FrameworkDeepSpeed && cfg.ZeroStage >= 1:
		out = append(out, parallel.Offload{OptimizerFraction: 1})
	case f != parallel.FrameworkDeepSpeed && cfg.DistributedOptimizer:
		out = append(out, parallel.Offload{OptimizerFraction: 0.5}, parallel.Offload{OptimizerFraction: 1})
	}
	return out
}

func gpuCapacityBytes(h cluster.Host) float64 { return h.GPU.MemoryBytes() }

// stageMemory is the memory of every pipeline rank, and the worst rank's
// overshoot against the capacity of the GPUs it lands on (capOf(r)).
func stageMemory(m model.Model, cfg parallel.Config, f parallel.Framework, capOf func(r int) float64) (memory.Estimate, float64) {
	est := memory.Estimate{}
	worstMiss := math.Inf(-1)
	for r := 0; r < cfg.PP; r++ {
		b := memory.EstimateStage(m, cfg, f, r)
		capacity := capOf(r)
		miss := b.Total() - capacity
		if miss > worstMiss || r == 0 {
			worstMiss = miss
			est.PeakBytesPerGPU, est.GPUCapacityBytes, est.Breakdown, est.PeakStage = b.Total(), capacity, b, r
		}
	}
	return est, worstMiss
}

// candidate is a config that fits: lb is its placement-free lower bound,
// quick its cost on the best construction order (the ranking key).
type candidate struct {
	cfg       parallel.Config
	lb, quick float64
	key       string
}

// quickEstimate prices a config on the best start order, with layers
// rebalanced for heterogeneous hosts, without local search.
func quickEstimate(e *planEval, sym []int, starts [][]int, o Options) float64 {
	pl := newPlacer(e, sym, starts)
	if allSame(sym) || o.IgnoreIslands { // one order to price
		return pl.cost(starts[0])
	}
	best, order := math.Inf(1), starts[0]
	for _, s := range starts {
		if c := pl.cost(s); c < best {
			best, order = c, s
		}
	}
	if split := rebalance(e, pl, order); split != nil && len(o.Fixed.StageLayers) == 0 {
		cfg := e.cfg
		cfg.StageLayers = split
		e2 := newPlanEval(e.c, e.m, cfg, e.f)
		e2.noRoundTrip = e.noRoundTrip
		best = math.Min(best, newPlacer(e2, sym, starts).cost(order))
	}
	return best
}

func configKey(c parallel.Config) string {
	return fmt.Sprintf("%03d/%03d/%03d/%02d/%02d/%03d/%s/%d/%v/%v/%.2f/%v/%03d/%02d", c.TP, c.PP, c.DP, c.CP, c.VPP, c.MicroBatch,
		c.Recompute, c.ZeroStage, c.DistributedOptimizer, c.SequenceParallel, c.Offload.OptimizerFraction, c.Offload.Params, c.EP, c.ETP)
}

// searchWithinHosts is Search with every TP group inside one host.
//
// Ranking is two-phase: every config gets a placement-free lower bound (the
// latency model with the fastest GPU and link everywhere); configs are then
// placed in bound order until the bound of the next one is no better than
// the TopK-th predicted time, or maxPlaced configs have been placed.
func searchWithinHosts(c *cluster.Cluster, m model.Model, o Options) (*Result, error) {
	if err := checkSearchInput(c, m, o); err != nil {
		return nil, err
	}
	if o.Framework == "" || o.Framework == parallel.FrameworkTorch {
		o.Framework = parallel.FrameworkMegatron
	}
	topK := o.TopK
	if topK <= 0 {
		topK = defaultTopK
	}
	world := c.TotalGPUs()
	maxCap := 0.0
	for _, h := range c.Hosts {
		maxCap = math.Max(maxCap, gpuCapacityBytes(h))
	}
	res := &Result{Model: ModelSummary{Name: m.Name, Parameters: m.Parameters(), Model: m}}
	if m.IsMoE() {
		res.Model.ActiveParameters = m.ActiveParameters()
	}
	configs := enumerate(c, m, o, maxCap)
	if len(configs) == 0 {
		return nil, explainNoConfig(c, m, o)
	}
	var cands []candidate
	var miss noFit
	var tallies [2]kindTally
	noteMiss := func(cfg parallel.Config, est memory.Estimate) {
		miss.note(cfg, est)
		tallies[kindIndex(cfg.UsesOffload())].miss.note(cfg, est)
	}
	sym := cluster.HostSymmetry(c)
	starts := startOrdersSym(c, sym)
	if o.IgnoreIslands {
		starts = [][]int{asPlacedOrder(c, o)}
	}
	overMP := map[int]bool{} // TP x CP x PP of configs over memory
	for _, cfg0 := range configs {
		capOf := func(int) float64 { return maxCap }
		baseEst, baseMiss := stageMemory(m, cfg0, o.Framework, capOf)
		for _, off := range offloadChoices(o.Framework, cfg0, o.Fixed, baseMiss > 0) {
			cfg := cfg0
			cfg.Offload = off
			res.Considered++
			tallies[kindIndex(cfg.UsesOffload())].considered++
			est, over := baseEst, baseMiss // the same config: estimated once
			if cfg.Offload != cfg0.Offload {
				est, over = stageMemory(m, cfg, o.Framework, capOf)
			}
			est.HostBytesPerNode, est.HostCapacityBytes = worstHostMemory(m, cfg, o.Framework, c.Hosts, nil)
			if over > 0 || (est.HostCapacityBytes > 0 && est.HostBytesPerNode > est.HostCapacityBytes) {
				res.RejectedMemory++
				noteMiss(cfg, est)
				overMP[cfg.TP*cfg.CP*cfg.PP] = true
				continue
			}
			cands = append(cands, candidate{cfg: cfg, key: configKey(cfg)})
		}
	}
	if len(cands) == 0 {
		return nil, miss.err(m, world, o.MemoryHeadroom, &tallies[kindIndex(true)].miss)
	}
	res.fitMP = memoryFloor(cands, overMP)
	scoreCandidates(c, m, o, sym, starts, cands)
	if o.beat > 0 {
		if cands = promising(cands, o.beat); len(cands) == 0 {
			return nil, errNothingBeats
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.quick != b.quick {
			return cmpFloat(a.quick, b.quick)
		}
		return strings.Compare(a.key, b.key)
	})
	placed := map[string]bool{}
	pm := &placement{c: c, m: m, o: o, sym: sym, starts: starts, orders: &orderCache{best: map[string][]int{}}}
	reject := func(cfg parallel.Config, plan Plan) {
		res.RejectedMemory++
		noteMiss(cfg, plan.Memory)
	}
	place := func(cfg parallel.Config) (Plan, bool) {
		r := pm.run([]parallel.Config{cfg})[0]
		if !r.ok {
			reject(cfg, r.plan)
		}
		return r.plan, r.ok
	}
	plans := pm.placeRanked(cands, topK, placed, reject)
	if len(plans) == 0 {
		return nil, miss.err(m, world, o.MemoryHeadroom, &tallies[kindIndex(true)].miss)
	}
	if !o.IgnoreIslands && !o.noComparison { // the naive comparison row needs no explanation
		res.Comparison = compareKinds(plans, cands, placed, &tallies, place)
	}
	res.Plans = plans[:min(topK, len(plans))]
	return res, nil
}

// asPlacedOrder is the host order of the naive and as-is rows: the
// options' HostOrder, else the cluster's own.
func asPlacedOrder(c *cluster.Cluster, o Options) []int {
	if o.HostOrder != nil {
		return o.HostOrder
	}
	return identity(len(c.Hosts))
}

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func unplaced(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func checkSearchInput(c *cluster.Cluster, m model.Model, o Options) error {
	switch {
	case c == nil || len(c.Hosts) == 0:
		return fmt.Errorf("cluster has no hosts")
	case o.GlobalBatch <= 0 || o.GlobalBatch > limits.MaxGlobalBatch:
		// The search enumerates the batch's divisors: 2^32 spun for ever.
		return fmt.Errorf("global batch size must be 1..%d (got %d)", limits.MaxGlobalBatch, o.GlobalBatch)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("model %q: %w", m.Name, err)
	}
	if err := checkConstraintsApply(o.Framework, o.Fixed); err != nil {
		return err
	}
	if o.Framework == parallel.FrameworkDeepSpeed && m.IsMoE() && !o.Fixed.DeepSpeedMoE {
		return &ConstraintError{Flag: "framework", Message: fmt.Sprintf("%s is a mixture-of-experts model: DeepSpeed plans it only from Megatron-DeepSpeed's arguments (--num-experts with --deepspeed, whose expert parallelism they render); use --framework megatron", m.Name)}
	}
	for i, h := range c.Hosts {
		if h.GPUs <= 0 {
			return fmt.Errorf("host %s (#%d) has no GPUs", h.Name, i)
		}
	}
	if o.HostOrder != nil {
		if !o.IgnoreIslands {
			return fmt.Errorf("a host order is priced as given: set IgnoreIslands with HostOrder")
		}
		if err := checkHostOrder(c, o.HostOrder); err != nil {
			return err
		}
	}
	return nil
}

// checkHostOrder: order lists every host of c exactly once.
func checkHostOrder(c *cluster.Cluster, order []int) error {
	if len(order) != len(c.Hosts) {
		return fmt.Errorf("host order lists %d hosts, the cluster has %d", len(order), len(c.Hosts))
	}
	seen := make([]bool, len(order))
	for _, h := range order {
		if h < 0 || h >= len(order) || seen[h] {
			return fmt.Errorf("host order %v is not a permutation of the cluster's %d hosts", order, len(order))
		}
		seen[h] = true
	}
	return nil
}

// orderCache remembers the best host order found per parallel shape
// (TP, PP, DP, CP, VPP): configs that differ only in micro-batch,
// recompute or optimizer want nearly the same placement, so later ones
// start from it and get a short local search.
type orderCache struct {
	best   map[string][]int
	shapes int
}

// fullSearchShapes is how many distinct shapes get the full local search;
// later shapes and repeats get shortEvalsPerHost evaluations per host.
const (
	fullSearchShapes  = 3
	shortEvalsPerHost = 8
	// maxShortEvals caps a short search (reached from 512 hosts): with
	// incremental evaluation each move costs O(DP), so the cap keeps a
	// short search short on 10k+ GPU clusters.
	maxShortEvals = 4096
)

func shortEvals(hosts int) int { return min(shortEvalsPerHost*hosts, maxShortEvals) }

func shapeKey(c parallel.Config) string {
	return fmt.Sprintf("%d/%d/%d/%d/%d/%d/%d", c.TP, c.PP, c.DP, c.CP, c.VPP, c.EP, c.ETP)
}

// options returns the starts and placement options for cfg.
func (oc *orderCache) options(cfg parallel.Config, starts [][]int, po PlaceOptions, hosts int) ([][]int, PlaceOptions) {
	if prev, ok := oc.best[shapeKey(cfg)]; ok {
		po.MaxEvals, po.short = shortEvals(hosts), true
		return append([][]int{prev}, starts...), po
	}
	oc.shapes++
	if oc.shapes > fullSearchShapes {
		po.MaxEvals = shortEvals(hosts)
	}
	return starts, po
}

func (oc *orderCache) remember(cfg parallel.Config, order []int) {
	oc.best[shapeKey(cfg)] = slices.Clone(order)
}

// placeAndPredict places cfg (naively when the options ignore islands),
// tries a layer split rebalanced for the stages' hosts (placed again for
// it), checks memory against the GPUs each stage landed on and predicts the
// iteration. Of the even and the rebalanced plan the faster that fits wins.
func placeAndPredict(c *cluster.Cluster, m model.Model, cfg parallel.Config, o Options, sym []int, st, starts [][]int, po PlaceOptions) placedPlan {
	if o.IgnoreIslands {
		e := newPlanEval(c, m, cfg, o.Framework)
		plan, ok, over := finishPlan(e, newPlacer(e, sym, starts), asPlacedOrder(c, o))
		return placedPlan{plan: plan, ok: ok, over: over}
	}
	e := newPlanEval(c, m, cfg, o.Framework)
	pl := newPlacer(e, sym, st)
	order, _ := pl.placeOrder(po)
	best, ok, over := finishPlan(e, pl, order)
	res := placedPlan{plan: best, ok: ok, over: over, remember: order}
	split := rebalance(e, pl, order)
	if split == nil || len(o.Fixed.StageLayers) > 0 { // the user's split stands
		return res
	}
	cfg.StageLayers = split
	e2 := newPlanEval(c, m, cfg, o.Framework)
	po.MaxEvals, po.short = shortEvals(len(c.Hosts)), true
	pl2 := newPlacer(e2, sym, append([][]int{order}, starts...))
	order2, _ := pl2.placeOrder(po)
	alt, ok2, over2 := finishPlan(e2, pl2, order2)
	if ok2 && (!ok || alt.Predicted.IterationSeconds < best.Predicted.IterationSeconds) {
		return placedPlan{plan: alt, ok: ok2, over: over2, remember: order2}
	}
	if !ok && over2 < over {
		return placedPlan{plan: alt, ok: ok2, over: over2, remember: order}
	}
	return res
}

// finishPlan predicts a placed config and checks its memory.
func finishPlan(e *planEval, pl *placer, order []int) (Plan, bool, float64) {
	blockHost := make([]int, e.nBlocks)
	pl.blocks(order, blockHost)
	plan := Plan{Config: e.cfg, Framework: e.f}
	plan.Config.StageLayers = append([]int(nil), e.cfg.StageLayers...)
	plan.Predicted = e.predict(blockHost)
	plan.Memory = e.memory(blockHost)
	plan.Placement = pl.rankPlacement(order)
	over := plan.Memory.PeakBytesPerGPU - plan.Memory.GPUCapacityBytes
	if plan.Memory.HostCapacityBytes > 0 {
		over = math.Max(over, plan.Memory.HostBytesPerNode-plan.Memory.HostCapacityBytes)
	}
	return plan, plan.Memory.Fits(), over
}

// rebalance returns a layer split balanced by each stage's measured speed
// on its hosts, or nil when the current split is already balanced. Megatron
// renders any split as a pipeline layout; DeepSpeed as PipelineModule
// partition boundaries (PIPETTE_PIPELINE_PARTS, see templates). With v
// virtual stages every chunk of rank r gets the same n_r layers, so the
// ranks share layers/v units.
func rebalance(e *planEval, pl *placer, order []int) []int {
	if e.p < 2 || e.m.NumLayers%e.v != 0 {
		return nil
	}
	blockHost := make([]int, e.nBlocks)
	pl.blocks(order, blockHost)
	per := make([]float64, e.p)
	fixed := make([]float64, e.p)
	cur := make([]int, e.p)
	for r := 0; r < e.p; r++ {
		for ch := 0; ch < e.v; ch++ {
			cur[r] += e.cfg.StageLayers[ch*e.p+r]
		}
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				hc := e.class(blockHost[e.block(r, d, c)])
				per[r] = math.Max(per[r], float64(e.v)*hc.layerTotal)
				if r == e.p-1 {
					fixed[r] = math.Max(fixed[r], hc.logits.Fwd+hc.logits.Bwd)
				}
			}
		}
	}
	units, err := schedule.BalanceLayers(per, fixed, e.m.NumLayers/e.v)
	if err != nil {
		return nil
	}
	curUnits := make([]float64, e.p)
	for r := range cur {
		curUnits[r] = float64(cur[r]) / float64(e.v)
	}
	curMax := 0.0
	for r := range cur {
		curMax = math.Max(curMax, fixed[r]+curUnits[r]*per[r])
	}
	if schedule.StageMaxTime(per, fixed, units) >= curMax*(1-1e-9) {
		return nil
	}
	split := make([]int, e.p*e.v)
	for ch := 0; ch < e.v; ch++ {
		for r := 0; r < e.p; r++ {
			split[ch*e.p+r] = units[r]
		}
	}
	return split
}

// hashTimes feeds the stage times to the schedule cache's key, 8 bytes a
// value (fmt.Fprint of each was 14% of BenchmarkPlan1024GPUs' CPU).
func hashTimes(h hash.Hash64, times ...[]float64) {
	var buf [8]byte
	for _, ts := range times {
		for _, x := range ts {
			binary.LittleEndian.PutUint64(buf[:], math.Float64bits(x))
			h.Write(buf[:])
		}
	}
}

// predict runs the event-driven schedule of every distinct pipeline, then
// each stage's exposed DP reduction, optimizer step and offload.
func (e *planEval) predict(blockHost []int) Prediction {
	m := e.cfg.NumMicroBatches
	work := make([]stageWork, e.p)
	hosts := make([]int, 0, e.dp*e.cp+e.cp)
	finish := make([]float64, e.p)
	lastBwd := make([]float64, e.p)
	perMB := make([]float64, e.p)
	for r := range perMB {
		_, perMB[r] = e.dpExposed(blockHost, r, 0, hosts[:0])
	}
	var ss sendScratch
	sends := e.blockSends(blockHost, &ss)
	cache := map[uint64]schedule.Result{}
	var crit schedule.Result
	var critWork []stageWork
	for d := 0; d < e.dp; d++ {
		pt := schedule.Times{MicroBatches: m, Link: make([]float64, e.p)}
		hsh := fnv.New64a()
		for r := 0; r < e.p; r++ {
			w := &work[r]
			e.stage(blockHost, r, d, hosts[:max(e.cp, 1)], w, sends)
			f, b := slices.Clone(w.fwd), slices.Clone(w.bwd)
			if perMB[r] > 0 { // ZeRO-2/3 traffic inside every micro-batch
				b[len(b)-1] += math.Max(0, perMB[r]-dpOverlapEfficiency*w.total)
			}
			pt.Fwd, pt.Bwd = append(pt.Fwd, f), append(pt.Bwd, b)
			pt.Link[r] = math.Max(w.sendNext, w.sendWr)
			hashTimes(hsh, f, b, []float64{pt.Link[r]})
			if d == 0 || w.lastBwd < lastBwd[r] {
				lastBwd[r] = w.lastBwd
			}
		}
		key := hsh.Sum64()
		res, ok := cache[key]
		if !ok {
			var err error
			res, err = schedule.Simulate(pt)
			if err != nil {
				panic(fmt.Sprintf("planner: %v for a validated config", err)) // enumerate checks m % pp
			}
			cache[key] = res
		}
		for r := range finish {
			finish[r] = math.Max(finish[r], res.Finish[r])
		}
		if res.Makespan >= crit.Makespan {
			crit = res
			critWork = slices.Clone(work)
		}
	}
	iter := 0.0
	emb := e.embeddingSyncSeconds(blockHost, &ss)
	for r := 0; r < e.p; r++ {
		x, _ := e.dpExposed(blockHost, r, lastBwd[r], hosts[:0])
		if r == 0 || r == e.p-1 {
			x += emb
		}
		iter = math.Max(iter, finish[r]+x)
	}
	off := e.offloadSeconds(blockHost)
	// Breakdown along the busiest rank of the slowest pipeline: its compute,
	// its TP/CP communication, the rest of the makespan (bubble and p2p
	// waits), the DP tail after the makespan, then optimizer and offload.
	busiest := 0
	for r := range critWork {
		if crit.Busy[r] > crit.Busy[busiest] {
			busiest = r
		}
	}
	w := critWork[busiest]
	bd := TimeBreakdown{
		Compute: float64(m)*(w.computeF+w.compB) + e.optSec,
		TP:      float64(m) * (w.commF + w.commB - w.a2a),
		EP:      float64(m) * w.a2a,
		DP:      math.Max(0, iter-crit.Makespan),
		Offload: off,
	}
	bd.PP = math.Max(0, crit.Makespan-float64(m)*(w.computeF+w.compB+w.commF+w.commB))
	total := iter + e.optSec + off
	world := float64(e.cfg.WorldSize())
	return Prediction{
		IterationSeconds: total,
		TokensPerSecond:  float64(e.cfg.GlobalBatch*e.m.SeqLength) / total,
		TFLOPSPerGPU:     ModelFLOPsPerIteration(e.m, e.cfg.GlobalBatch) / total / world / 1e12,
		HWTFLOPSPerGPU:   HardwareFLOPsPerIteration(e.m, e.cfg.GlobalBatch, e.cfg.Recompute) / total / world / 1e12,
		BubbleFraction:   crit.BubbleFraction,
		Breakdown:        bd,
	}
}

// offloadSeconds is the exposed CPU-offload time of the slowest host.
func (e *planEval) offloadSeconds(blockHost []int) float64 {
	if e.cfg.Offload == (parallel.Offload{}) {
		return 0
	}
	worst := 0.0
	seen := map[int]bool{}
	for _, h := range blockHost {
		if h < 0 || seen[h] {
			continue
		}
		seen[h] = true
		host := e.c.Hosts[h]
		worst = math.Max(worst, memory.EstimateOffload(e.m, e.cfg, e.f, host, host.GPUs).ExposedSeconds)
	}
	return worst
}

// memory is the worst stage's per-GPU memory against the smallest GPU the
// stage landed on, and the host memory of the fullest node.
func (e *planEval) memory(blockHost []int) memory.Estimate {
	capOf := func(r int) float64 {
		capacity := math.Inf(1)
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				if h := blockHost[e.block(r, d, c)]; h >= 0 {
					capacity = math.Min(capacity, gpuCapacityBytes(e.c.Hosts[h]))
				}
			}
		}
		return capacity
	}
	est, _ := stageMemory(e.m, e.cfg, e.f, capOf)
	est.HostBytesPerNode, est.HostCapacityBytes = worstHostMemory(e.m, e.cfg, e.f, e.c.Hosts, uniqueHosts(blockHost))
	return est
}

// worstHostMemory is the host-memory need and capacity of the host that
// misses by most (or comes closest), each host judged by its own ranks and
// its own memory: hosts differ in GPU count and DRAM. only (nil: all
// hosts) restricts it to the hosts a placement uses. Capacity 0 means no
// host states its memory; the need is then the largest.
func worstHostMemory(m model.Model, cfg parallel.Config, f parallel.Framework, hosts []cluster.Host, only []int) (need, capacity float64) {
	worst := math.Inf(-1)
	// By GPU count: hosts of a kind repeat, mostly in runs, so the last
	// count is checked before the map.
	needOf := map[int]float64{}
	lastGPUs, lastNeed := -1, 0.0
	visit := func(h *cluster.Host) {
		n := lastNeed
		if h.GPUs != lastGPUs {
			var ok bool
			if n, ok = needOf[h.GPUs]; !ok {
				n = memory.HostBytesPerNode(m, cfg, f, h.GPUs)
				needOf[h.GPUs] = n
			}
			lastGPUs, lastNeed = h.GPUs, n
		}
		if h.MemoryBytes <= 0 {
			if capacity == 0 {
				need = math.Max(need, n)
			}
			return
		}
		if over := n - h.MemoryBytes; over > worst {
			worst, need, capacity = over, n, h.MemoryBytes
		}
	}
	if only == nil {
		for i := range hosts {
			visit(&hosts[i])
		}
		return need, capacity
	}
	for _, i := range only {
		visit(&hosts[i])
	}
	return need, capacity
}

func uniqueHosts(blockHost []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, h := range blockHost {
		if h >= 0 && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// noFit remembers the config that missed memory by the least, and whether
// GPU or host memory was the larger miss.
type noFit struct {
	set  bool
	best float64
	cfg  parallel.Config
	mem  memory.Estimate
	host bool
}

// note records cfg's memory estimate (capacities filled in) if it misses
// by less than any config seen so far.
func (n *noFit) note(cfg parallel.Config, est memory.Estimate) {
	over, host := est.PeakBytesPerGPU-est.GPUCapacityBytes, false
	if est.HostCapacityBytes > 0 && est.HostBytesPerNode-est.HostCapacityBytes > over {
		over, host = est.HostBytesPerNode-est.HostCapacityBytes, true
	}
	if !n.set || over < n.best {
		n.set, n.best, n.cfg, n.mem, n.host = true, over, cfg, est, host
	}
}

func (n *noFit) seen() bool { return n.set }

// headroomSuggestion is, when the closest miss is of GPU memory and within
// what headroom keeps free, the largest --memory-headroom (in hundredths)
// under which it fits, for a configuration the user knows runs; "" when
// none. The margin is not slack: docs/cost-model.md shows a measured run
// that used nearly all of it.
func (n *noFit) headroomSuggestion(headroom float64) string {
	if n.host || headroom <= 0 || n.best <= 0 || n.mem.GPUCapacityBytes <= 0 {
		return ""
	}
	gpuBytes := n.mem.GPUCapacityBytes / (1 - headroom)
	kept := gpuBytes - n.mem.GPUCapacityBytes
	if n.best > kept {
		return ""
	}
	h := math.Floor(100*(1-n.mem.PeakBytesPerGPU/gpuBytes)) / 100
	return fmt.Sprintf("--memory-headroom %s if this configuration is known to run on these GPUs (the miss is within the %.1f GiB that --memory-headroom %s keeps free beyond the estimate; measured runs used most of that margin: docs/cost-model.md)",
		strconv.FormatFloat(math.Max(h, 0), 'f', -1, 64), kept/gpu.GiB, strconv.FormatFloat(headroom, 'f', -1, 64))
}

// memoryMiss is the closest miss in the comparison's terms.
func (n *noFit) memoryMiss() *MemoryMiss {
	mm := &MemoryMiss{Config: n.cfg, Memory: "gpu", Stage: n.mem.PeakStage, NeedBytes: n.mem.PeakBytesPerGPU,
		CapacityBytes: n.mem.GPUCapacityBytes, MissBytes: n.best}
	if n.host {
		mm.Memory, mm.NeedBytes, mm.CapacityBytes = "host", n.mem.HostBytesPerNode, n.mem.HostCapacityBytes
	}
	return mm
}

// err explains the closest miss. offloaded is the closest miss among the
// configs that offload; when any was tried, the advice says how far even
// offload falls short instead of suggesting it. headroom is the search's
// --memory-headroom: a GPU miss it covers is named first, with the
// headroom that lets the plan through.
func (n *noFit) err(m model.Model, world int, headroom float64, offloaded *noFit) error {
	e := &NoFitError{BestMissBytes: n.best}
	c := n.cfg
	peak := n.mem.Breakdown.Total()
	if s := n.headroomSuggestion(headroom); s != "" {
		e.Suggestions = append(e.Suggestions, s)
	}
	if peak > 0 && n.best > 0 {
		need := int(math.Ceil(float64(world) * peak / math.Max(peak-n.best, 1)))
		e.Suggestions = append(e.Suggestions, fmt.Sprintf("use more GPUs (about %d instead of %d)", need, world))
	}
	if c.Recompute != parallel.RecomputeFull {
		e.Suggestions = append(e.Suggestions, "allow full activation recomputation (--recompute full)")
	}
	switch {
	case offloaded.seen():
		mm := offloaded.memoryMiss()
		e.Suggestions = append(e.Suggestions, fmt.Sprintf("CPU offload was tried: the closest offloaded plan still misses by %.1f GiB of %s memory (needs %.1f GiB, has %.1f GiB)",
			mm.MissBytes/gpu.GiB, mm.Memory, mm.NeedBytes/gpu.GiB, mm.CapacityBytes/gpu.GiB))
	case c.Offload == (parallel.Offload{}):
		e.Suggestions = append(e.Suggestions, "allow CPU offload of optimizer states (drop --no-offload or pass --offload)")
	}
	e.Suggestions = append(e.Suggestions, "lower --seq-length or the micro-batch size")
	where := "per GPU"
	if n.host {
		where = "of host memory on a node"
	}
	e.Message = fmt.Sprintf("no configuration of %s fits on %d GPUs: the closest (TP%d PP%d DP%d CP%d mb%d, recompute %s) misses by %.1f GiB %s; try: %s",
		m.Name, world, c.TP, c.PP, c.DP, c.CP, c.MicroBatch, c.Recompute, n.best/gpu.GiB, where, strings.Join(e.Suggestions, "; "))
	return e
}
