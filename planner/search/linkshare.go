package search

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Shared pipeline links (issue 22, Pipette's premise: real links are
// shared). Every pipeline runs the same schedule, so at each stage
// boundary the data-parallel replicas (and CP ranks) send their
// activations at the same time, and after the DP reduction every replica
// all-reduces its tied embedding between its first and last stage. A
// host's NIC carries every block that leaves (enters) it across hosts at
// that boundary: a send from host a to host b takes
//
//	bytes x max(blocks leaving a, blocks entering b) / rate(a, b) + latency,
//
// the rate being a GPU's share of the pair's link (planEval.link divides
// it by TP, whose ranks send side by side). n replicas on one host pair
// get rate/n, blocks that all cross links as fast as the NIC get NIC/n, a
// block alone on its link costs what it did before, and a prediction stays
// linear in the calibration factors (cluster.Linearize). Where a host
// sends over links of different rates, the slow one is charged for the
// fast ones' blocks as if they were slow too: pessimistic, but counts
// rather than rate-weighted sums keep every change local (below).
//
// Speed: the full objective (planEval.cost) counts in two passes over the
// blocks with per-host counts (blockSends, sharedEmbedding). The
// incremental evaluator keeps the counts per boundary and host (linkLoad)
// and updates them per moved block. A count on host h changes only when a
// block moves onto or off h, so every pipeline whose time it changes has a
// block on such a host. When every host has the same slot count (the
// clusters the search meets at scale) a move changes a host's blocks all
// or none, and those pipelines are the ones the move touched anyway; with
// uneven slots incEval.touchSharers scans for them. Where no host holds
// two blocks and CP = 1 (sharesLinks) nothing is counted at all.

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

// sharedSend is one activation send under the counts out (blocks leaving
// the sending host) and in (entering the receiving one) over a link of spb
// seconds per byte.
func (e *planEval) sharedSend(out, in, spb, latency float64) float64 {
	return e.p2p*max(out, in)*spb + latency
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
	out, in  []float64 // per host, this boundary's counts
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
				s.out[a]++
				s.in[b]++
			}
		}
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				u := e.block(r, d, c)
				if s.spb[u] > 0 {
					s.sends[u] = e.sharedSend(s.out[blockHost[u]], s.in[blockHost[e.block(nx, d, c)]], s.spb[u], s.lat[u])
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

// linkLoad is blockSends' counts kept up to date move by move for the
// incremental evaluator: out[r*n+h] (in[r*n+h]) is the number of blocks
// leaving (entering) host h across hosts at boundary r. Per block it keeps
// its own send's link (spb: seconds per byte, 0 when the send shares
// nothing; lat: the latency, or the whole send when spb is 0).
type linkLoad struct {
	n        int
	out, in  []float64
	spb, lat []float64
	// The tied-embedding all-reduces (embShares): emb[h] counts the
	// replicas whose first or last stage is on host h and whose other end
	// is not; embSpb and embLat are each replica's own link (index d*CP +
	// c), as spb and lat are a block's.
	emb            []float64
	embSpb, embLat []float64
}

func (ld *linkLoad) init(e *planEval) {
	n := len(e.c.Hosts)
	if ld.n == n && len(ld.out) == e.p*n && len(ld.spb) == e.nBlocks {
		clear(ld.out)
		clear(ld.in)
		clear(ld.emb)
		return
	}
	k := e.dp * e.cp
	*ld = linkLoad{n: n, out: make([]float64, e.p*n), in: make([]float64, e.p*n),
		spb: make([]float64, e.nBlocks), lat: make([]float64, e.nBlocks),
		emb: make([]float64, n), embSpb: make([]float64, k), embLat: make([]float64, k)}
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

// unsend takes block u's send out of ld's counts.
func (e *planEval) unsend(ld *linkLoad, blockHost []int, u int) {
	to, r, ok := e.sendTo(u)
	if s := ld.spb[u]; ok && s > 0 {
		ld.out[r*ld.n+blockHost[u]]--
		ld.in[r*ld.n+blockHost[to]]--
	}
}

// send prices block u's own link under blockHost and adds its send to
// ld's counts.
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
		ld.out[r*ld.n+a]++
		ld.in[r*ld.n+b]++
	}
}

// moveBlock moves block x to host h in blockHost, keeping ld's counts (of
// x's send, of the send into x and of its replica's embedding all-reduce)
// up to date.
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
	r := x / (e.cp * e.dp)
	emb := e.embShares() && (r == 0 || r == e.p-1)
	k := x - r*e.cp*e.dp // the replica: d*CP + c
	if emb {
		e.unembed(ld, blockHost, k)
	}
	blockHost[x] = h
	e.send(ld, blockHost, x)
	if in {
		e.send(ld, blockHost, w)
	}
	if emb {
		e.embed(ld, blockHost, k)
	}
}

// embShares reports whether replicas' tied-embedding all-reduces can share
// a NIC: there is one (tied embeddings, PP > 1, not the wave) and a host
// can hold two blocks.
func (e *planEval) embShares() bool {
	return e.shares && !e.wave && e.p > 1 && e.embeddingShardBytes() > 0
}

// ownEmbed is replica k's embedding all-reduce on its own link: its
// seconds per byte and latency when its first and last stage are on two
// hosts, or 0 and the whole all-reduce's seconds when not.
func (e *planEval) ownEmbed(a, b int) (spb, lat float64) {
	l := e.pipeLink(a, b)
	if a < 0 || b < 0 || a == b {
		return 0, AllReduceSeconds(e.embeddingShardBytes(), 2, l)
	}
	return 1 / l.BytesPerS, l.LatencyS
}

func (e *planEval) embedHosts(blockHost []int, k int) (first, last int) {
	return blockHost[k], blockHost[k+(e.p-1)*e.cp*e.dp]
}

// embed adds replica k's embedding all-reduce to ld.emb.
func (e *planEval) embed(ld *linkLoad, blockHost []int, k int) {
	a, b := e.embedHosts(blockHost, k)
	s, lat := e.ownEmbed(a, b)
	ld.embSpb[k], ld.embLat[k] = s, lat
	if s > 0 {
		ld.emb[a]++
		ld.emb[b]++
	}
}

// unembed takes replica k's embedding all-reduce out of ld.emb.
func (e *planEval) unembed(ld *linkLoad, blockHost []int, k int) {
	if s := ld.embSpb[k]; s > 0 {
		a, b := e.embedHosts(blockHost, k)
		ld.emb[a]--
		ld.emb[b]--
	}
}

// embedSeconds is replica k's embedding all-reduce under ld: a 2-member
// ring all-reduce moves the shard each way once (AllReduceSeconds), over
// NICs that the other replicas' all-reduces share.
func (e *planEval) embedSeconds(ld *linkLoad, blockHost []int, k int) float64 {
	if ld.embSpb[k] == 0 {
		return ld.embLat[k]
	}
	a, b := e.embedHosts(blockHost, k)
	return e.embeddingShardBytes()*max(ld.emb[a], ld.emb[b])*ld.embSpb[k] + 2*ld.embLat[k]
}

// sharedEmbedding is embeddingSyncSeconds with every replica's all-reduce
// sharing its hosts' NICs, in two passes with per-host counts in s.
func (e *planEval) sharedEmbedding(blockHost []int, s *sendScratch) float64 {
	n, k := len(e.c.Hosts), e.dp*e.cp
	if len(s.out) != n {
		s.out, s.in = make([]float64, n), make([]float64, n)
	}
	if len(s.sends) != e.nBlocks {
		s.spb, s.lat, s.sends = make([]float64, e.nBlocks), make([]float64, e.nBlocks), make([]float64, e.nBlocks)
	}
	ld := linkLoad{emb: s.out, embSpb: s.spb[:k], embLat: s.lat[:k]}
	for i := 0; i < k; i++ {
		e.embed(&ld, blockHost, i)
	}
	worst := 0.0
	for i := 0; i < k; i++ {
		worst = max(worst, e.embedSeconds(&ld, blockHost, i))
	}
	for i := 0; i < k; i++ {
		a, b := e.embedHosts(blockHost, i)
		for _, h := range [2]int{a, b} {
			if h >= 0 {
				s.out[h] = 0
			}
		}
	}
	return worst
}

// countAll fills ld for every block of blockHost.
func (e *planEval) countAll(ld *linkLoad, blockHost []int) { e.recount(ld, blockHost, nil, nil) }

// recount is countAll given prev, ld's counts for the placement was (or
// nil): a send (an embedding all-reduce) whose two hosts are the same in
// both keeps prev's own link instead of looking it up again, which gives
// the same values.
func (e *planEval) recount(ld *linkLoad, blockHost []int, prev *linkLoad, was []int) {
	if !e.shares {
		return
	}
	if prev != nil && (prev.n != len(e.c.Hosts) || len(prev.spb) != e.nBlocks) {
		prev = nil
	}
	ld.init(e)
	if e.embShares() {
		for k := 0; k < e.dp*e.cp; k++ {
			a, b := e.embedHosts(blockHost, k)
			if prev == nil {
				e.embed(ld, blockHost, k)
				continue
			}
			if wa, wb := e.embedHosts(was, k); a != wa || b != wb {
				e.embed(ld, blockHost, k)
				continue
			}
			s := prev.embSpb[k]
			ld.embSpb[k], ld.embLat[k] = s, prev.embLat[k]
			if s > 0 {
				ld.emb[a]++
				ld.emb[b]++
			}
		}
	}
	for r := 0; r < e.p; r++ {
		nx, ok := e.nextRank(r)
		for d := 0; d < e.dp; d++ {
			for c := 0; c < e.cp; c++ {
				u := e.block(r, d, c)
				if !ok {
					ld.spb[u], ld.lat[u] = 0, 0
					continue
				}
				to := e.block(nx, d, c)
				a, b := blockHost[u], blockHost[to]
				if prev == nil || a != was[u] || b != was[to] {
					e.sendAt(ld, blockHost, u, to, r)
					continue
				}
				s := prev.spb[u]
				ld.spb[u], ld.lat[u] = s, prev.lat[u]
				if s > 0 {
					ld.out[r*ld.n+a]++
					ld.in[r*ld.n+b]++
				}
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
			sends[u] = e.sharedSend(ld.out[r*ld.n+blockHost[u]], ld.in[r*ld.n+blockHost[to]], ld.spb[u], ld.lat[u])
		default:
			sends[u] = ld.lat[u]
		}
	}
}
