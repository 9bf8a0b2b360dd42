package search

import (
	"errors"
	"fmt"
	"slices"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

// Tensor parallelism across hosts. Megatron accepts a TP group larger than
// a host (--tensor-model-parallel-size 16 on 8-GPU hosts): the group's
// all-reduces then cross the NIC. The planner prices it by merging every k
// consecutive hosts (file order, same island, same GPUs) into one "host"
// of k*g GPUs whose internal link is what a TP ring spanning them gets per
// hop, min(bus, NIC), at the NIC's latency, and whose links to other
// merged hosts carry k hosts' NICs; the ordinary search then runs on the
// merged cluster with TP pinned to k*g, and the placement is mapped back
// to the real hosts (rank order is unchanged: host by host, GPU by GPU).
//
// A ring crosses each host boundary once: of the g ranks on a host only
// one sends over the NIC, and NCCL splits the ring's buffer over as many
// channels as the host has NICs, so the crossing hop runs at the host's
// whole NIC rate, not a g-th of it. Pricing it at NIC/g made TP16 over two
// 8xA100 hosts 4-13x slower than TP8 where it measures about 2x (issue 22).
//
// It is priced whenever --tp pins it, and searched otherwise only where it
// could win: when nothing fits inside hosts, or when the NIC gives a GPU at
// least a quarter of its intra-host bandwidth (multi-node NVLink and
// similar), never on ordinary InfiniBand clusters where intra-host TP is
// an order of magnitude faster.

// crossHostMinNICShare is the NIC/bus bandwidth ratio per GPU above which
// cross-host TP is searched without being pinned.
const crossHostMinNICShare = 0.25

// unmergePlacement maps a plan placed on the merged cluster back to the
// real hosts: local rank l of merged host i runs on groups[i][l/g], GPU l%g.
func unmergePlacement(c *cluster.Cluster, groups [][]int, p *Plan) {
	g := uniformGPUsPerHost(c)
	for i, rp := range p.Placement {
		real := groups[rp.HostIndex][rp.LocalRank/g]
		p.Placement[i] = RankPlacement{Rank: rp.Rank, Host: c.Hosts[real].Name, HostIndex: real,
			LocalRank: rp.LocalRank % g, GPU: rp.GPU % g}
	}
}

// searchCrossHostTP plans with TP pinned to tp > GPUs per host.
func searchCrossHostTP(c *cluster.Cluster, m model.Model, o Options, tp int) (*Result, error) {
	g := uniformGPUsPerHost(c)
	if g == 0 || tp%g != 0 {
		return nil, fmt.Errorf("tensor parallel size %d across hosts must be a multiple of the GPUs per host (%d), with the same GPU count on every host", tp, g)
	}
	mc, groups, err := mergeHosts(c, tp/g)
	if err != nil {
		return nil, err
	}
	o.Fixed.TP = tp
	res, err := searchWithinHosts(mc, m, o)
	if err != nil {
		return nil, err
	}
	for i := range res.Plans {
		unmergePlacement(c, groups, &res.Plans[i])
	}
	res.Comparison = nil // its plans were placed on the merged cluster
	return res, nil
}

// crossHostCouldWin reports whether unpinned cross-host TP is worth
// searching on c after the within-host search returned err.
func crossHostCouldWin(c *cluster.Cluster, err error) bool {
	var nf *NoFitError
	if errors.As(err, &nf) {
		return true
	}
	g := uniformGPUsPerHost(c)
	if g == 0 || len(c.Hosts) < 2 {
		return false
	}
	for a := range c.Hosts {
		for b := range c.Hosts {
			if a != b && c.LinkBetween(a, b).BytesPerS/float64(g) < crossHostMinNICShare*c.Hosts[a].IntraBytesPerS {
				return false
			}
		}
	}
	return true
}

// addCrossHostTP searches TP = 2g, 4g, ... (while it divides the heads and
// the hosts) and merges those plans into res, fastest first.
func addCrossHostTP(c *cluster.Cluster, m model.Model, o Options, res *Result, err error) (*Result, error) {
	g := uniformGPUsPerHost(c)
	if g == 0 {
		return res, err
	}
	for k := 2; k <= len(c.Hosts) && k*g <= m.Heads; k *= 2 {
		if len(c.Hosts)%k != 0 || m.Heads%(k*g) != 0 {
			continue
		}
		r, e := searchCrossHostTP(c, m, o, k*g)
		if e != nil {
			continue
		}
		if res == nil {
			res, err = r, nil
			continue
		}
		res.Considered += r.Considered
		res.RejectedMemory += r.RejectedMemory
		res.Plans = append(res.Plans, r.Plans...)
		res.fitMP = minPositive(res.fitMP, r.fitMP)
	}
	if res != nil {
		res.Plans = fastestFirst(res.Plans, o.TopK)
	}
	return res, err
}

// fastestFirst sorts plans merged from several searches by predicted time
// (stable: equal times keep their order) and keeps the topK (0: the
// default).
func fastestFirst(plans []Plan, topK int) []Plan {
	if topK <= 0 {
		topK = defaultTopK
	}
	slices.SortStableFunc(plans, func(a, b Plan) int {
		return cmpFloat(a.Predicted.IterationSeconds, b.Predicted.IterationSeconds)
	})
	return plans[:min(len(plans), topK)]
}

// withHeadroom is c with every GPU's memory less the headroom share: the
// capacity every fit check, ranking and report of the search sees.
func withHeadroom(c *cluster.Cluster, h float64) *cluster.Cluster {
	if h <= 0 {
		return c
	}
	out := *c
	out.Hosts = slices.Clone(c.Hosts)
	for i := range out.Hosts {
		out.Hosts[i].GPU.MemoryGiB *= 1 - h
	}
	return &out
}

// Search enumerates every config Megatron-LM (or DeepSpeed) would accept on
// the cluster, rejects those that do not fit in memory, predicts the rest,
// places the best and returns the TopK, fastest first. When nothing fits the
// error is a *NoFitError. TP groups stay inside hosts unless --tp pins a
// larger size or cross-host TP could win (see above). Plans may leave hosts
// idle (Plan.Idle) when no layout uses them all or fewer are faster
// (fewerhosts.go), unless Options.UseAllGPUs.
func Search(c *cluster.Cluster, m model.Model, o Options) (*Result, error) {
	if err := checkSearchInput(c, m, o); err != nil {
		return nil, err
	}
	if err := checkPrecision(c, o); err != nil {
		return nil, err
	}
	o.Fixed.Precision = precisionOn(c, o.Fixed.Precision)
	m = attentionOn(c, m)
	if h := o.MemoryHeadroom; !limits.MemoryHeadroom.Contains(h) {
		return nil, fmt.Errorf("memory headroom %g: want a share from %s (0.05 keeps 5%% of each GPU free)", h, limits.MemoryHeadroom)
	}
	c = withHeadroom(c, o.MemoryHeadroom)
	res, err := searchEveryHost(c, m, o)
	if o.UseAllGPUs || o.IgnoreIslands || o.HostOrder != nil {
		return res, err
	}
	return addFewerHosts(c, m, o, res, err)
}

// searchEveryHost is Search on every host of c (c already has the memory
// headroom taken off).
func searchEveryHost(c *cluster.Cluster, m model.Model, o Options) (*Result, error) {
	minGPUs := c.Hosts[0].GPUs
	for _, h := range c.Hosts {
		minGPUs = min(minGPUs, h.GPUs)
	}
	if g := uniformGPUsPerHost(c); o.Fixed.TP > minGPUs && g > 0 && o.Fixed.TP%g == 0 {
		if o.HostOrder != nil {
			return nil, fmt.Errorf("TP %d spans hosts of %d GPUs: a given host order is priced only with TP inside a host", o.Fixed.TP, minGPUs)
		}
		return searchCrossHostTP(c, m, o, o.Fixed.TP)
	}
	res, err := searchWithinHosts(c, m, o)
	if o.Fixed.TP == 0 && !o.IgnoreIslands && crossHostCouldWin(c, err) {
		return addCrossHostTP(c, m, o, res, err)
	}
	return res, err
}
