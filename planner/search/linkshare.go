package search

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Shared pipeline links (issue 22, Pipette's premise: real links are
// shared). Every pipeline runs the same schedule, so at each stage
// boundary the data-parallel replicas (and CP ranks) send their
// activations at the same time. A host's NIC sends the activations of
// every block leaving it, each at its own pair's rate (a GPU's share of it:
// planEval.link divides the link by TP, whose ranks send side by side),
// and receives those of every block entering it: a send takes
//
//	p2p bytes x max(sum over blocks leaving a of 1/rate, sum over blocks entering b of 1/rate) + latency.
//
// Blocks that all cross links as fast as the NIC get NIC/count each; n
// replicas on one host pair get its rate/n (the pair's own share is part
// of both sums); a block alone on its link costs what it did before. Every
// term scales with the link rates, so calibration factors still scale a
// prediction linearly (cluster.Linearize).
//
// Speed: the full objective (planEval.cost) prices every block's send in
// two passes over the blocks with per-host sums (blockSends). The
// incremental evaluator keeps the sums per boundary and host (linkLoad)
// and updates them per moved block. A move of whole hosts (every host with
// the same slot count, the clusters the search meets at scale) changes a
// sum only on a host whose blocks all moved, so every pipeline whose sends
// it changes is one the move touched anyway; only clusters with uneven
// slots scan for pipelines that share a changed host
// (incEval.touchSharers). Where no host holds two blocks and CP = 1
// (sharesLinks) nothing is counted at all.

// sharesLinks reports whether two blocks can ever send at one boundary
// through one host: some host holds two blocks (TP below its GPU count), or
// CP ranks send side by side. When not, every sum is the block's own link
// and its send costs what P2PSeconds says.
func sharesLinks(c *cluster.Cluster, cfg parallel.Config) bool {
	if cfg.CP > 1 {
		return true
	}
	for _, h := range c.Hosts {
		if h.GPUs >= 2*max(cfg.TP, 1) {
			return true
		}
	}
	return false
}

// nextRank is the rank stage r sends its activations to, and whether it
// sends at all (the last rank only wraps around with virtual stages).
// Boundary r carries rank r's sends.
func (e *planEval) nextRank(r int) (int, bool) {
	if r < e.p-1 {
		return r + 1, true
	}
	return 0, e.v > 1
}

// sharedSend is one activation send under the NIC sums out (of the sending
// host) and in (of the receiving one), in seconds per byte.
func (e *planEval) sharedSend(out, in, latency float64) float64 {
	return e.p2p*max(out, in) + latency
}

// ownSend is a send's own link from host a to host b: its seconds per
// byte and latency when it crosses hosts (and may share), or 0 and the
// whole send's seconds when it stays on a host or a host is not placed
// yet (then it shares nothing).
func (e *planEval) ownSend(a, b int) (spb, lat float64) {
	l := e.pipeLink(a, b)
	if a < 0 || b < 0 || a == b {
		return 0, P2PSeconds(e.p2p, l)
	}
	return 1 / l.BytesPerS, l.LatencyS
}

// sendScratch is blockSends' working memory.
type sendScratch struct {
	out, in  []float64 // per host, this boundary's sums
	touched  []int
	spb, lat []float64 // per block: its own link's seconds per byte, latency
	sends    []float64 // per block: its send's seconds
}

// blockSends returns every block's activation send time under blockHost
// (indexed by block; 0 for blocks that send nothing), or nil when no link
// can be shared (then stage prices each send alone). Unplaced blocks'
// sends share nothing: partial placements stay lower bounds.
func (e *planEval) blockSends(blockHost []int, s *sendScratch) []float64 {
	if !e.shares || e.p2p <= 0 || !anyPlaced(blockHost) {
		return nil
	}
	n := len(e.c.Hosts)
	if len(s.out) != n {
		s.out, s.in = make([]float64, n), make([]float64, n)
	}
	if len(s.sends) != e.nBlocks {
		s.spb, s.lat, s.sends = make([]float64, e.nBlocks), make([]float64, e.nBlocks), make([]float64, e.nBlocks)
	}
	for r := 0; r < e.p; r++ {
		nx, ok := e.nextRank(r)
		if !ok {
			continue
		}
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				u := e.block(r, d, c)
				a, b := blockHost[u], blockHost[e.block(nx, d, c)]
				spb, lat := e.ownSend(a, b)
				s.spb[u], s.lat[u] = spb, lat
				if spb == 0 {
					s.sends[u] = lat
					continue
				}
				if s.out[a] == 0 && s.in[a] == 0 {
					s.touched = append(s.touched, a)
				}
				if s.out[b] == 0 && s.in[b] == 0 {
					s.touched = append(s.touched, b)
				}
				s.out[a] += spb
				s.in[b] += spb
			}
		}
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				u := e.block(r, d, c)
				if s.spb[u] > 0 {
					s.sends[u] = e.sharedSend(s.out[blockHost[u]], s.in[blockHost[e.block(nx, d, c)]], s.lat[u])
				}
			}
		}
		for _, h := range s.touched {
			s.out[h], s.in[h] = 0, 0
		}
		s.touched = s.touched[:0]
	}
	return s.sends
}

func anyPlaced(blockHost []int) bool {
	for _, h := range blockHost {
		if h >= 0 {
			return true
		}
	}
	return false
}

// linkLoad is blockSends' sums kept up to date move by move for the
// incremental evaluator: out[r*n+h] (in[r*n+h]) is the seconds per byte
// host h's NIC needs to send (receive) one activation of every block that
// leaves (enters) it at boundary r. Per block it keeps its own send's link
// (spb: seconds per byte, 0 when the send shares nothing; lat: the
// latency, or the whole send when spb is 0), so removing a send needs no
// link lookup.
type linkLoad struct {
	n        int
	out, in  []float64
	spb, lat []float64
}

func (ld *linkLoad) init(e *planEval) {
	n := len(e.c.Hosts)
	if ld.n == n && len(ld.out) == e.p*n && len(ld.spb) == e.nBlocks {
		clear(ld.out)
		clear(ld.in)
		return
	}
	*ld = linkLoad{n: n, out: make([]float64, e.p*n), in: make([]float64, e.p*n),
		spb: make([]float64, e.nBlocks), lat: make([]float64, e.nBlocks)}
}

// sendTo is the block u sends its activations to and the boundary, if any.
func (e *planEval) sendTo(u int) (to, r int, ok bool) {
	c, d, r := u%e.cp, u/e.cp%e.dp, u/(e.cp*e.dp)
	nx, ok := e.nextRank(r)
	return e.block(nx, d, c), r, ok
}

// sendFrom is the block that sends its activations to u, if any (other
// than u itself).
func (e *planEval) sendFrom(u int) (int, bool) {
	c, d, r := u%e.cp, u/e.cp%e.dp, u/(e.cp*e.dp)
	prev := r - 1
	if r == 0 {
		prev = e.p - 1
	}
	if nx, ok := e.nextRank(prev); !ok || nx != r || prev == r {
		return 0, false
	}
	return e.block(prev, d, c), true
}

// unsend takes block u's send out of ld's sums.
func (e *planEval) unsend(ld *linkLoad, blockHost []int, u int) {
	to, r, ok := e.sendTo(u)
	if s := ld.spb[u]; ok && s > 0 {
		ld.out[r*ld.n+blockHost[u]] -= s
		ld.in[r*ld.n+blockHost[to]] -= s
	}
}

// send prices block u's own link under blockHost and adds its send to
// ld's sums.
func (e *planEval) send(ld *linkLoad, blockHost []int, u int) {
	to, r, ok := e.sendTo(u)
	if !ok {
		ld.spb[u], ld.lat[u] = 0, 0
		return
	}
	e.sendAt(ld, blockHost, u, to, r)
}

// sendAt is send for block u sending to block to at boundary r.
func (e *planEval) sendAt(ld *linkLoad, blockHost []int, u, to, r int) {
	a, b := blockHost[u], blockHost[to]
	s, lat := e.ownSend(a, b)
	ld.spb[u], ld.lat[u] = s, lat
	if s > 0 {
		ld.out[r*ld.n+a] += s
		ld.in[r*ld.n+b] += s
	}
}

// moveBlock moves block x to host h in blockHost, keeping ld's sums (of
// x's send and of the send into x) up to date.
func (e *planEval) moveBlock(ld *linkLoad, blockHost []int, x, h int) {
	if !e.shares {
		blockHost[x] = h
		return
	}
	w, in := e.sendFrom(x)
	e.unsend(ld, blockHost, x)
	if in {
		e.unsend(ld, blockHost, w)
	}
	blockHost[x] = h
	e.send(ld, blockHost, x)
	if in {
		e.send(ld, blockHost, w)
	}
}

// countAll fills ld for every block of blockHost.
func (e *planEval) countAll(ld *linkLoad, blockHost []int) {
	if !e.shares {
		return
	}
	ld.init(e)
	for r := 0; r < e.p; r++ {
		nx, ok := e.nextRank(r)
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				u := e.block(r, d, c)
				if !ok {
					ld.spb[u], ld.lat[u] = 0, 0
					continue
				}
				e.sendAt(ld, blockHost, u, e.block(nx, d, c), r)
			}
		}
	}
}

// loadSends writes pipeline d's sends under ld into sends (by block).
func (e *planEval) loadSends(ld *linkLoad, blockHost []int, d int, sends []float64) {
	for r := 0; r < e.p; r++ {
		nx, ok := e.nextRank(r)
		u, to := e.block(r, d, 0), e.block(nx, d, 0)
		switch {
		case !ok:
		case ld.spb[u] > 0:
			sends[u] = e.sharedSend(ld.out[r*ld.n+blockHost[u]], ld.in[r*ld.n+blockHost[to]], ld.lat[u])
		default:
			sends[u] = ld.lat[u]
		}
	}
}
