package schedule

import (
	"fmt"
	"math"
)

// simulateWave runs Hanayo's wave-like schedule (Liu et al., SC'23) as a
// list schedule. Hanayo's runtime executes a per-rank action list, and we
// found no published rule for that list to copy, so each rank, whenever it
// falls idle, starts the best op whose input has arrived: a forward before
// a backward, then the oldest micro-batch, then the deepest chunk. A rank
// takes a new micro-batch (its chunk 0 forward) only while it then holds
// at most waveActivationCap chunk activations. Every choice is made at the
// clock of the earliest idle rank, when every op that could start by then
// is already known, so the result depends only on the op and link times.
// Within a chunk micro-batches run in order.
func simulateWave(pt Times, p, v, m int) (Result, error) {
	link := func(r int) float64 {
		if r >= 0 && r < len(pt.Link) {
			return pt.Link[r]
		}
		return 0
	}
	idx, endF, endB := opEnds(p, v, m)
	nextF := make([]int, p*v) // next micro-batch per (rank, chunk)
	nextB := make([]int, p*v)
	inFlight := make([]int, p) // chunk activations held
	free := make([]float64, p)
	blocked := make([]bool, p)
	left := make([]int, p)
	res := Result{Finish: make([]float64, p), Busy: make([]float64, p)}
	for r := range left {
		left[r] = 2 * v * m
	}
	// ready is when op can start on rank r, or -1 if its input is unknown.
	ready := func(op Op, r int) float64 {
		from, c, back, hop, ok := waveProducer(op, r, p, v)
		if !ok {
			return 0
		}
		t := endF[idx(from, c, op.Micro)]
		if back {
			t = endB[idx(from, c, op.Micro)]
		}
		if t < 0 {
			return -1
		}
		return t + link(hop)
	}
	for {
		r := -1
		for x := 0; x < p; x++ {
			if left[x] > 0 && !blocked[x] && (r < 0 || free[x] < free[r]) {
				r = x
			}
		}
		if r < 0 {
			break
		}
		t := free[r]
		var best Op
		found, next := false, math.Inf(1)
		better := func(a, b Op) bool {
			if a.Backward != b.Backward {
				return !a.Backward
			}
			if a.Micro != b.Micro {
				return a.Micro < b.Micro
			}
			return a.Chunk > b.Chunk
		}
		for c := 0; c < v; c++ {
			for _, back := range []bool{true, false} {
				i := nextF[r*v+c]
				if back {
					i = nextB[r*v+c]
				}
				if i >= m || (!back && c == 0 && inFlight[r]+v > waveActivationCap(p, v)) {
					continue
				}
				op := Op{Backward: back, Chunk: c, Micro: i}
				at := ready(op, r)
				switch {
				case at < 0:
				case at > t:
					next = min(next, at)
				case !found || better(op, best):
					best, found = op, true
				}
			}
		}
		if !found {
			if math.IsInf(next, 1) {
				blocked[r] = true
			} else {
				free[r] = next
			}
			continue
		}
		d, end, n := pt.Fwd[r][best.Chunk], &endF[idx(r, best.Chunk, best.Micro)], &nextF[r*v+best.Chunk]
		if best.Backward {
			d, end, n = pt.Bwd[r][best.Chunk], &endB[idx(r, best.Chunk, best.Micro)], &nextB[r*v+best.Chunk]
		}
		*n++
		if best.Backward {
			inFlight[r]--
		} else {
			inFlight[r]++
		}
		*end = t + d
		free[r] = t + d
		res.Busy[r] += d
		left[r]--
		for x := range blocked {
			blocked[x] = false
		}
		if pt.Trace {
			res.Events = append(res.Events, Event{Rank: r, Chunk: best.Chunk, Micro: best.Micro, Backward: best.Backward, Start: t, End: t + d})
		}
	}
	for r := 0; r < p; r++ {
		if left[r] > 0 {
			return Result{}, fmt.Errorf("schedule: wave deadlock (p=%d v=%d m=%d)", p, v, m)
		}
	}
	res.finish(free)
	return res, nil
}

// waveActivationCap is the chunk activations one rank may hold: 2p
// micro-batches' worth of its stage, twice what 1F1B's first stage keeps.
// With p micro-batches the greedy order above stayed up to 20 points over
// the bubble bound; with 2p it meets the bound for one wave at N = 2P-1 and
// 2P and binds above (wave_test.go). The what-if row says memory is not
// re-estimated.
func waveActivationCap(p, v int) int { return 2 * p * v }
