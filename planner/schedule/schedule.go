package schedule

import "fmt"

// Times describes one pipeline for the schedule simulator.
type Times struct {
	// Fwd[r][c] and Bwd[r][c] are the seconds pipeline rank r spends on
	// model chunk c for one micro-batch (Bwd includes recomputation).
	Fwd, Bwd [][]float64
	// Link[r] is the one-message p2p time from rank r to rank r+1 (and back);
	// Link[p-1] is the wrap-around hop from the last rank to the first that
	// interleaved schedules use between model chunks.
	Link         []float64
	MicroBatches int
	// Wave runs Hanayo's wave-like schedule (Liu et al., SC'23) instead of
	// Megatron's: len(Fwd[r]) = 2 x waves chunks, chunk c of rank r is global
	// stage c*p+r for even c and c*p+(p-1-r) for odd c, so each wave sweeps
	// down the ranks and back up and the turn at either end stays on one rank
	// (no hop, and no wrap-around link). Link[r] is then the hop between
	// ranks r and r+1 in either direction; Link[p-1] is unused.
	Wave bool
	// Trace asks for every op's start and end in Result.Events (the
	// report draws them); the search leaves it off.
	Trace bool
}

// Result is the simulated critical path of one iteration.
type Result struct {
	Makespan float64
	// Finish[r] is when rank r's last backward ends (its gradients are
	// complete and the data-parallel reduction can start).
	Finish []float64
	// Busy[r] is rank r's total compute time.
	Busy []float64
	// BubbleFraction = 1 - sum(Busy) / (Makespan * ranks).
	BubbleFraction float64
	// Events are the ops in the order they ran (only with Trace).
	Events []Event
}

// Event is one forward or backward of one model chunk for one
// micro-batch on one pipeline rank.
type Event struct {
	Rank, Chunk, Micro int
	Backward           bool
	Start, End         float64
}

// Kind picks the op order and the dependencies of Simulate.
type Kind struct {
	Wave bool
}

type Op struct {
	Backward     bool
	Chunk, Micro int
}

// scheduleOrder is the op order of rank r under Megatron's 1F1B (v=1) or
// interleaved 1F1B (v>1) schedule: warm-up forwards, steady one-forward-
// one-backward, cool-down backwards.
func scheduleOrder(r, p, v, m int) []Op {
	total := m * v
	warm := p - r - 1
	if v > 1 {
		warm = (p-r-1)*2 + (v-1)*p
	}
	warm = min(warm, total)
	chunkOf := func(k int, backward bool) (int, int) {
		if v == 1 {
			return 0, k
		}
		c := (k % (p * v)) / p
		if backward {
			c = v - 1 - c
		}
		return c, (k/(p*v))*p + k%p
	}
	ops := make([]Op, 0, 2*total)
	add := func(k int, backward bool) {
		c, mb := chunkOf(k, backward)
		ops = append(ops, Op{Backward: backward, Chunk: c, Micro: mb})
	}
	for k := 0; k < warm; k++ {
		add(k, false)
	}
	for k := 0; k < total-warm; k++ {
		add(warm+k, false)
		add(k, true)
	}
	for k := total - warm; k < total; k++ {
		add(k, true)
	}
	return ops
}

// Simulate runs the pipeline schedule event by event with uneven
// stage times and per-boundary link times and returns its critical path.
// A forward of chunk c on rank r waits for the same micro-batch's forward on
// rank r-1 (or, on rank 0, chunk c-1 on the last rank) plus the hop; a
// backward waits for rank r+1's backward (or chunk c+1 on rank 0), and the
// last virtual stage's backward for its own forward. Sends are asynchronous.
func Simulate(pt Times) (Result, error) {
	p := len(pt.Fwd)
	if p == 0 || pt.MicroBatches <= 0 {
		return Result{}, fmt.Errorf("schedule: need at least one stage and one micro-batch")
	}
	v := len(pt.Fwd[0])
	m := pt.MicroBatches
	k := Kind{Wave: pt.Wave}
	if k.Wave {
		if v < 2 || v%2 != 0 {
			return Result{}, fmt.Errorf("schedule: a wave schedule needs an even number of chunks per rank (2 per wave), got %d", v)
		}
		return simulateWave(pt, p, v, m)
	}
	if v > 1 && m%p != 0 {
		return Result{}, fmt.Errorf("schedule: interleaved schedule needs micro-batches (%d) divisible by pipeline stages (%d)", m, p)
	}
	link := func(r int) float64 {
		if r < len(pt.Link) {
			return pt.Link[r]
		}
		return 0
	}
	idx, endF, endB := opEnds(p, v, m)
	orders := make([][]Op, p)
	next := make([]int, p)
	free := make([]float64, p)
	res := Result{Finish: make([]float64, p), Busy: make([]float64, p)}
	for r := range orders {
		orders[r] = scheduleOrder(r, p, v, m)
	}
	remaining := 2 * p * v * m
	for remaining > 0 {
		progress := false
		for r := 0; r < p; r++ {
			for next[r] < len(orders[r]) {
				op := orders[r][next[r]]
				ready, ok := dependencyReady(op, r, p, v, k, endF, endB, idx, link)
				if !ok {
					break
				}
				start := max(ready, free[r])
				var d float64
				if op.Backward {
					d = pt.Bwd[r][op.Chunk]
					endB[idx(r, op.Chunk, op.Micro)] = start + d
				} else {
					d = pt.Fwd[r][op.Chunk]
					endF[idx(r, op.Chunk, op.Micro)] = start + d
				}
				free[r] = start + d
				if pt.Trace {
					res.Events = append(res.Events, Event{Rank: r, Chunk: op.Chunk, Micro: op.Micro, Backward: op.Backward, Start: start, End: start + d})
				}
				res.Busy[r] += d
				next[r]++
				remaining--
				progress = true
			}
		}
		if !progress {
			return Result{}, fmt.Errorf("schedule: deadlock (p=%d v=%d m=%d)", p, v, m)
		}
	}
	res.finish(free)
	return res, nil
}

// finish sets each rank's finish (its last op's end, free[r]), the
// makespan and the bubble fraction.
func (res *Result) finish(free []float64) {
	busy := 0.0
	for r := range free {
		res.Finish[r] = free[r]
		res.Makespan = max(res.Makespan, free[r])
		busy += res.Busy[r]
	}
	if res.Makespan > 0 {
		res.BubbleFraction = 1 - busy/(res.Makespan*float64(len(free)))
	}
}

// Producer names the op whose end op waits for: rank from's op on chunk
// c of the same micro-batch (a backward when back, else a forward), sent
// over link hop (-1: same rank, no send). ok is false for the first
// forward of the first stage, which waits for nothing.
func Producer(op Op, r, p, v int, k Kind) (from, c int, back bool, hop int, ok bool) {
	c = op.Chunk
	if k.Wave {
		return waveProducer(op, r, p, v)
	}
	if !op.Backward {
		switch {
		case r > 0:
			return r - 1, c, false, r - 1, true
		case c > 0:
			return p - 1, c - 1, false, p - 1, true
		}
		return 0, 0, false, -1, false
	}
	switch {
	case r < p-1:
		return r + 1, c, true, r, true
	case c < v-1:
		return 0, c + 1, true, p - 1, true
	}
	return r, c, false, -1, true
}

// waveProducer is producer for the wave: even chunks run down the ranks,
// odd chunks back up, and a turn (rank p-1 from an even chunk to the next
// odd one, rank 0 from an odd chunk to the next even one) stays on its rank.
func waveProducer(op Op, r, p, v int) (from, c int, back bool, hop int, ok bool) {
	c = op.Chunk
	down := c%2 == 0
	if !op.Backward {
		switch {
		case down && r > 0:
			return r - 1, c, false, r - 1, true
		case !down && r < p-1:
			return r + 1, c, false, r, true
		case c > 0:
			return r, c - 1, false, -1, true
		}
		return 0, 0, false, -1, false
	}
	switch {
	case down && r < p-1:
		return r + 1, c, true, r, true
	case !down && r > 0:
		return r - 1, c, true, r - 1, true
	case c < v-1:
		return r, c + 1, true, -1, true
	}
	return r, c, false, -1, true
}

func dependencyReady(op Op, r, p, v int, k Kind, endF, endB []float64, idx func(r, c, i int) int, link func(int) float64) (float64, bool) {
	from, c, back, hop, ok := Producer(op, r, p, v, k)
	if !ok {
		return 0, true
	}
	t := endF[idx(from, c, op.Micro)]
	if back {
		t = endB[idx(from, c, op.Micro)]
	}
	if hop >= 0 {
		return t + link(hop), t >= 0
	}
	return t, t >= 0
}

// opEnds indexes each (rank, chunk, micro-batch) op's end time, -1 until
// it is scheduled, for forwards and backwards.
func opEnds(p, v, m int) (idx func(r, c, i int) int, endF, endB []float64) {
	endF = make([]float64, p*v*m)
	endB = make([]float64, p*v*m)
	for i := range endF {
		endF[i], endB[i] = -1, -1
	}
	return func(r, c, i int) int { return (r*v+c)*m + i }, endF, endB
}
