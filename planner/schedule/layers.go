package schedule

import (
	"container/heap"
	"fmt"
)

// BalanceLayers splits total decoder layers over stages so that the slowest
// stage is as fast as possible: stage i takes fixed[i] + n_i*perLayer[i]
// seconds, and every stage keeps at least one layer. Handing out layers one
// at a time to the stage that would finish earliest with one more is optimal
// for this min-max problem (each stage's time is increasing and linear in
// its layers); ties go to the earlier stage, so the split is deterministic.
func BalanceLayers(perLayer, fixed []float64, total int) ([]int, error) {
	n := len(perLayer)
	if n == 0 || len(fixed) != n {
		return nil, fmt.Errorf("balance layers: need one per-layer and one fixed time per stage")
	}
	if total < n {
		return nil, fmt.Errorf("balance layers: %d layers cannot fill %d stages", total, n)
	}
	out := make([]int, n)
	h := &stageHeap{per: perLayer, fixed: fixed, n: out}
	for i := range out {
		out[i] = 1
		h.idx = append(h.idx, i)
	}
	heap.Init(h)
	for left := total - n; left > 0; left-- {
		i := h.idx[0]
		out[i]++
		heap.Fix(h, 0)
	}
	return out, nil
}

type stageHeap struct {
	per, fixed []float64
	n          []int
	idx        []int
}

// next is the stage's time if it took one more layer.
func (h *stageHeap) next(i int) float64 { return h.fixed[i] + float64(h.n[i]+1)*h.per[i] }
func (h *stageHeap) Len() int           { return len(h.idx) }
func (h *stageHeap) Less(a, b int) bool {
	ta, tb := h.next(h.idx[a]), h.next(h.idx[b])
	if ta != tb {
		return ta < tb
	}
	return h.idx[a] < h.idx[b]
}
func (h *stageHeap) Swap(a, b int) { h.idx[a], h.idx[b] = h.idx[b], h.idx[a] }
func (h *stageHeap) Push(x any)    { h.idx = append(h.idx, x.(int)) }
func (h *stageHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// StageMaxTime is the slowest stage's time under a split.
func StageMaxTime(perLayer, fixed []float64, split []int) float64 {
	worst := 0.0
	for i := range split {
		worst = max(worst, fixed[i]+float64(split[i])*perLayer[i])
	}
	return worst
}
