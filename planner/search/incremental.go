package search

import (
	"math"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// incEval prices local-search moves incrementally: it keeps every
// pipeline's critical-path terms (its finish time minus each stage's drain,
// its stages' last backward, its embedding all-reduce) in segment trees
// over pipelines, every stage's DP reduction, and the memory penalty, so a
// move re-prices only the pipelines and DP groups whose blocks changed:
// O(p log DP) per changed pipeline and O(DP) per changed DP group, instead
// of O(p * DP) for the whole placement. It mirrors planEval.cost term by
// term (incremental_test.go checks they agree) and covers the common case,
// CP = 1 without DeepSpeed ZeRO-2/3's per-micro-batch traffic; other
// configs use the full evaluation.
type incEval struct {
	e        *planEval
	slots    []int
	sameSlot int   // slots of every host, or 0 when hosts differ
	bh       []int // block -> host under the current order
	next     []int // scratch: block -> host under the moved order
	// load is bh's pipeline sends per link (linkshare.go), kept up to date
	// block by block.
	load linkLoad
	// hostMark is scratch for touchSharers (uneven slots only); sends
	// holds the sends of the pipeline being priced (loadSends).
	hostMark []bool
	sends    []float64
	// fin[d] holds pipeline d's span minus drain before each stage (p
	// values) and its embedding all-reduce; the tree keeps maxima.
	fin vecTree
	// lbw[d] holds each stage's last backward in pipeline d; minima.
	lbw            vecTree
	dpTotal, dpTai []float64
	pen            float64
	shard          float64
	work           []stageWork
	hosts          []int
	vec, vec2      []float64 // addBound's fin and lbw
	touchedD       []int
	touchedR       []int
	markD, markR   []bool
	undo           incUndo
}

// incUndo is what the last move changed, so that undoing it restores
// saved values instead of re-pricing.
type incUndo struct {
	// full: the move re-priced everything; undo copies back the state
	// saved before it (snap), which costs a copy, not a second re-pricing.
	full          bool
	snap          incState
	blocks, hosts []int
	ds, rs        []int
	fin, lbw      []float64 // saved leaves of ds, in order
	total, tail   []float64 // saved DP terms of rs, in order
	pen           float64
}

// incState is all of incEval's priced state, saved before a full
// re-pricing.
type incState struct {
	hosts                 []int
	fin, lbw, total, tail []float64
	// load is the link load before the move: save swaps it with
	// incEval.load (which reset then refills), restore swaps it back.
	load linkLoad
}

func (st *incState) save(ie *incEval) {
	ie.load, st.load = st.load, ie.load
	st.hosts = append(st.hosts[:0], ie.bh...)
	st.fin = append(st.fin[:0], ie.fin.v...)
	st.lbw = append(st.lbw[:0], ie.lbw.v...)
	st.total = append(st.total[:0], ie.dpTotal...)
	st.tail = append(st.tail[:0], ie.dpTai...)
}

func (st *incState) restore(ie *incEval) {
	ie.load, st.load = st.load, ie.load
	copy(ie.bh, st.hosts)
	copy(ie.fin.v, st.fin)
	copy(ie.lbw.v, st.lbw)
	copy(ie.dpTotal, st.total)
	copy(ie.dpTai, st.tail)
}

// newIncEval returns nil when cfg is not covered (see incEval).
func newIncEval(e *planEval, slots []int, order []int) *incEval {
	if e.sums == nil || e.cp != 1 || (e.f == parallel.FrameworkDeepSpeed && e.cfg.ZeroStage >= 2) {
		return nil
	}
	ie := &incEval{e: e, slots: slots, bh: make([]int, e.nBlocks), next: make([]int, e.nBlocks),
		dpTotal: make([]float64, e.p), dpTai: make([]float64, e.p), shard: e.embeddingShardBytes(),
		work: make([]stageWork, e.p), hosts: make([]int, 0, e.dp+1), vec: make([]float64, e.p+1),
		vec2: make([]float64, e.p), markD: make([]bool, e.dp), markR: make([]bool, e.p)}
	ie.sameSlot = slots[0]
	for _, s := range slots {
		if s != ie.sameSlot {
			ie.sameSlot = 0
		}
	}
	ie.fin = newVecTree(e.dp, e.p+1, false)
	ie.lbw = newVecTree(e.dp, e.p, true)
	ie.reset(order, nil, math.Inf(1))
	return ie
}

// reset prices order from scratch. prev, when not nil, is the state saved
// just before (incState.save): what depends only on hosts that did not
// change, a stage's DP reduction and a block's own send link, is taken
// from it instead of priced again, which gives the same values. It returns
// the cost, or, as soon as the pipelines priced so far already cost at
// least bound, a figure at least bound and no more than the cost; the
// state is then half priced, and the caller restores prev (revert).
func (ie *incEval) reset(order []int, prev *incState, bound float64) float64 {
	e := ie.e
	fillBlocks(order, ie.slots, ie.bh)
	var was []int
	if prev != nil {
		was = prev.hosts
		e.recount(&ie.load, ie.bh, &prev.load, was)
	} else {
		e.countAll(&ie.load, ie.bh)
	}
	for r := 0; r < e.p; r++ {
		if was == nil || ie.stageMoved(r, was) {
			ie.stageDP(r)
		}
	}
	ie.pen = 0
	for u, h := range ie.bh {
		ie.pen += ie.penalty(u, h)
	}
	fin, lbw := ie.startBound()
	for d := 0; d < e.dp; d++ {
		ie.pipeline(d)
		if c := ie.addBound(fin, lbw, d); c >= bound {
			return c
		}
	}
	ie.fin.build()
	ie.lbw.build()
	return ie.cost()
}

func fillBlocks(order, slots, out []int) {
	u := 0
	for _, h := range order {
		for k := 0; k < slots[h] && u < len(out); k++ {
			out[u] = h
			u++
		}
	}
	for ; u < len(out); u++ {
		out[u] = -1
	}
}

// pipeline recomputes pipeline d's leaves as planEval.cost does.
func (ie *incEval) pipeline(d int) {
	e := ie.e
	v := float64(e.v)
	var sends []float64
	if e.shares {
		if len(ie.sends) != e.nBlocks {
			ie.sends = make([]float64, e.nBlocks)
		}
		sends = ie.sends
		e.loadSends(&ie.load, ie.bh, d, sends)
	}
	for r := 0; r < e.p; r++ {
		e.stageQuick(ie.bh, r, d, ie.hosts[:1], &ie.work[r], sends)
	}
	span := e.pipelineSpan(ie.work[:e.p])
	drain := 0.0
	fin, lbw := ie.fin.leaf(d), ie.lbw.leaf(d)
	for r := 0; r < e.p; r++ {
		w := &ie.work[r]
		fin[r] = span - drain
		lbw[r] = w.lastBwd
		drain += w.lastBwd/v + w.sendNext
	}
	fin[e.p] = 0
	switch {
	case ie.shard > 0 && e.embShares():
		fin[e.p] = e.embedSeconds(&ie.load, ie.bh, d) // CP = 1: replica d
	case ie.shard > 0:
		first, last := ie.bh[e.block(0, d, 0)], ie.bh[e.block(e.p-1, d, 0)]
		fin[e.p] = AllReduceSeconds(ie.shard, 2, e.pipeLink(first, last))
	}
}

// stageMoved reports whether a block of stage r is on another host in bh
// than in was (stageDP reads nothing else that a move changes).
func (ie *incEval) stageMoved(r int, was []int) bool {
	e := ie.e
	for d := 0; d < e.dp; d++ {
		if u := e.block(r, d, 0); ie.bh[u] != was[u] {
			return true
		}
	}
	return false
}

// stageDP recomputes stage r's DP reduction (total and tail).
func (ie *incEval) stageDP(r int) {
	e := ie.e
	hosts := ie.hosts[:0]
	for d := 0; d < e.dp; d++ {
		hosts = append(hosts, ie.bh[e.block(r, d, 0)])
	}
	ie.dpTotal[r], ie.dpTai[r], _ = dpCommSeconds(e.cfg, e.f, e.params[r], e.dpRingOf(hosts).seconds)
}

// penalty is block u's share of planEval.memoryPenalty on host h.
func (ie *incEval) penalty(u, h int) float64 {
	if h < 0 {
		return 0
	}
	r := u / (ie.e.cp * ie.e.dp)
	if over := ie.e.stageMem[r] - ie.e.c.Hosts[h].GPU.MemoryBytes(); over > 0 {
		return over / gpu.GiB * memPenaltyPerGiB
	}
	return 0
}

// cost is planEval.cost of the current order.
func (ie *incEval) cost() float64 { return ie.costOf(ie.fin.root(), ie.lbw.root()) }

// costOf is cost with fin and lbw in place of the trees' roots.
func (ie *incEval) costOf(fin, lbw []float64) float64 {
	e := ie.e
	emb := fin[e.p]
	iter := 0.0
	for r := 0; r < e.p; r++ {
		x := exposedDP(ie.dpTotal[r], ie.dpTai[r], lbw[r])
		if r == 0 || r == e.p-1 {
			x += emb
		}
		iter = max(iter, max(0, fin[r])+x)
	}
	return iter + e.optSec + ie.pen
}

// moved re-prices the order after positions lo..hi (inclusive) changed and
// returns its cost. When the cost is at least bound it may return any
// figure from bound to the cost, having stopped pricing early: the caller
// must then revert the move (a caller that keeps only cheaper orders does).
func (ie *incEval) moved(order []int, lo, hi int, bound float64) float64 {
	e := ie.e
	u0 := lo * ie.sameSlot
	if ie.sameSlot == 0 {
		u0 = 0
		for _, h := range order[:lo] {
			u0 += ie.slots[h]
		}
	}
	u := u0
	for _, h := range order[lo : hi+1] {
		for k := 0; k < ie.slots[h] && u < len(ie.bh); k++ {
			ie.next[u] = h
			u++
		}
	}
	changed := 0
	for x := u0; x < u; x++ {
		if ie.next[x] != ie.bh[x] {
			changed++
		}
	}
	un := &ie.undo
	un.blocks, un.hosts, un.ds, un.rs = un.blocks[:0], un.hosts[:0], un.ds[:0], un.rs[:0]
	un.fin, un.lbw, un.total, un.tail = un.fin[:0], un.lbw[:0], un.total[:0], un.tail[:0]
	un.pen, un.full = ie.pen, false
	if changed > e.nBlocks/4 { // cheaper to start over
		un.full = true
		un.snap.save(ie)
		return ie.reset(order, &un.snap, bound)
	}
	for x := u0; x < u; x++ {
		h := ie.next[x]
		if h == ie.bh[x] {
			continue
		}
		un.blocks, un.hosts = append(un.blocks, x), append(un.hosts, ie.bh[x])
		ie.pen += ie.penalty(x, h) - ie.penalty(x, ie.bh[x])
		ie.setHost(x, h)
		// Block x = d + r*DP (CP = 1): it feeds pipeline d and DP group r.
		ie.touchD(x % e.dp)
		if r := x / e.dp; !ie.markR[r] {
			ie.markR[r] = true
			ie.touchedR = append(ie.touchedR, r)
		}
	}
	if ie.sameSlot == 0 {
		ie.touchSharers(un.blocks, un.hosts)
	}
	for _, r := range ie.touchedR {
		un.rs = append(un.rs, r)
		un.total, un.tail = append(un.total, ie.dpTotal[r]), append(un.tail, ie.dpTai[r])
		ie.stageDP(r)
		ie.markR[r] = false
	}
	ie.touchedR = ie.touchedR[:0]
	for _, d := range ie.touchedD {
		un.ds = append(un.ds, d)
		un.fin = append(un.fin, ie.fin.leaf(d)...)
		un.lbw = append(un.lbw, ie.lbw.leaf(d)...)
		ie.markD[d] = false
	}
	defer func() { ie.touchedD = ie.touchedD[:0] }()
	// The touched pipelines alone bound the cost from below (see reset):
	// once those priced so far reach bound, the move stops; the trees
	// take the new leaves only at the end, so revert's restored leaves
	// match them either way.
	fin, lbw := ie.startBound()
	for i, d := range ie.touchedD {
		ie.pipeline(d)
		if i < len(ie.touchedD)-1 {
			if c := ie.addBound(fin, lbw, d); c >= bound {
				return c
			}
		}
	}
	for _, d := range ie.touchedD {
		ie.fin.update(d)
		ie.lbw.update(d)
	}
	return ie.cost()
}

// startBound returns fin and lbw for addBound, holding no pipeline yet.
func (ie *incEval) startBound() (fin, lbw []float64) {
	fin, lbw = ie.vec[:ie.e.p+1], ie.vec2[:ie.e.p]
	for k := range fin {
		fin[k] = math.Inf(-1)
	}
	for k := range lbw {
		lbw[k] = math.Inf(1)
	}
	return fin, lbw
}

// addBound adds pipeline d's leaves to fin (maxima) and lbw (minima) and
// returns the cost with those in place of the trees' roots. The cost only
// grows with a larger fin and a smaller lbw, so over some of the
// pipelines it bounds the whole order's cost from below, in floating point
// too.
func (ie *incEval) addBound(fin, lbw []float64, d int) float64 {
	for k, x := range ie.fin.leaf(d) {
		fin[k] = max(fin[k], x)
	}
	for k, x := range ie.lbw.leaf(d) {
		lbw[k] = min(lbw[k], x)
	}
	return ie.costOf(fin, lbw)
}

// setHost moves block x to host h, keeping the link load up to date.
func (ie *incEval) setHost(x, h int) { ie.e.moveBlock(&ie.load, ie.bh, x, h) }

func (ie *incEval) touchD(d int) {
	if !ie.markD[d] {
		ie.markD[d] = true
		ie.touchedD = append(ie.touchedD, d)
	}
}

// touchSharers marks every pipeline with a block on a host that gained or
// lost blocks (old hosts of blocks, and their new ones in bh): its sends
// may share a link whose load changed. With every host's slots equal the
// moved pipelines are all of them (see linkshare.go), so this runs only
// for uneven slots.
func (ie *incEval) touchSharers(blocks, old []int) {
	e := ie.e
	if len(ie.hostMark) != len(e.c.Hosts) {
		ie.hostMark = make([]bool, len(e.c.Hosts))
	}
	for i, x := range blocks {
		for _, h := range [2]int{old[i], ie.bh[x]} {
			if h >= 0 {
				ie.hostMark[h] = true
			}
		}
	}
	for d := 0; d < e.dp; d++ {
		for r := 0; r < e.p && !ie.markD[d]; r++ {
			if h := ie.bh[e.block(r, d, 0)]; h >= 0 && ie.hostMark[h] {
				ie.touchD(d)
			}
		}
	}
	for i, x := range blocks {
		for _, h := range [2]int{old[i], ie.bh[x]} {
			if h >= 0 {
				ie.hostMark[h] = false
			}
		}
	}
}

// revert undoes the last move; order must already be back as it was.
func (ie *incEval) revert(order []int) {
	un := &ie.undo
	if un.full {
		un.snap.restore(ie)
		ie.pen = un.pen
		return
	}
	for i := len(un.blocks) - 1; i >= 0; i-- {
		ie.setHost(un.blocks[i], un.hosts[i])
	}
	fw, lw := ie.fin.w, ie.lbw.w
	for i, d := range un.ds {
		copy(ie.fin.leaf(d), un.fin[i*fw:(i+1)*fw])
		copy(ie.lbw.leaf(d), un.lbw[i*lw:(i+1)*lw])
		ie.fin.update(d)
		ie.lbw.update(d)
	}
	for i, r := range un.rs {
		ie.dpTotal[r], ie.dpTai[r] = un.total[i], un.tail[i]
	}
	ie.pen = un.pen
}

// vecTree is a segment tree over n leaves of width-w vectors that keeps
// the element-wise maximum (or minimum) of every subtree.
type vecTree struct {
	n, w, size int
	min        bool
	v          []float64 // node i's vector at v[i*w:(i+1)*w], leaves from size
}

func newVecTree(n, w int, isMin bool) vecTree {
	size := 1
	for size < n {
		size *= 2
	}
	t := vecTree{n: n, w: w, size: size, min: isMin, v: make([]float64, 2*size*w)}
	identity := math.Inf(-1) // padding leaves never win
	if isMin {
		identity = math.Inf(1)
	}
	for i := size + n; i < 2*size; i++ {
		for k := range w {
			t.v[i*w+k] = identity
		}
	}
	return t
}

func (t *vecTree) leaf(i int) []float64 { j := (t.size + i) * t.w; return t.v[j : j+t.w] }

func (t *vecTree) root() []float64 { return t.v[t.w : 2*t.w] }

// pull recomputes node i from its children and reports whether it
// changed.
func (t *vecTree) pull(i int) bool {
	dst := t.v[i*t.w : (i+1)*t.w]
	l := t.v[2*i*t.w : (2*i+1)*t.w]
	r := t.v[(2*i+1)*t.w : (2*i+2)*t.w]
	changed := false
	for k := range dst {
		x := max(l[k], r[k])
		if t.min {
			x = min(l[k], r[k])
		}
		if x != dst[k] {
			dst[k], changed = x, true
		}
	}
	return changed
}

func (t *vecTree) build() {
	for i := t.size - 1; i >= 1; i-- {
		t.pull(i)
	}
}

// update re-pulls the leaf's ancestors up to the first that keeps its
// value (the ones above it depend on nothing else that changed): a move
// seldom changes the maximum beyond a few levels (issue 23).
func (t *vecTree) update(leaf int) {
	for i := (t.size + leaf) / 2; i >= 1; i /= 2 {
		if !t.pull(i) {
			return
		}
	}
}
