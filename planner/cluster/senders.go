package cluster

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// SenderRate is one point of a network path's rate against the number of
// GPUs of a host that send over it at once (`senders` in a NIC entry or a
// link). Over TCP one process's streams rarely fill a cloud NIC: Sailor's
// measurements of A100 nodes on GCP (sailor/providers/
// multizone_bandwidths_het.json) give one GPU 2.42 GB/s, two at once 3.67
// and four 6.04. Without a table every number of senders gets the entry's
// whole rate, as RDMA NICs give one GPU.
type SenderRate struct {
	GPUs         int     `yaml:"gpus" json:"gpus"`
	RateGbitPerS float64 `yaml:"rate_gbit_per_s" json:"rate_gbit_per_s"`
}

// validateSenders checks a senders table against the entry's whole rate
// (all the host's GPUs sending at once): GPU counts rising, each rate at
// most the whole.
func validateSenders(errs *yamlcheck.Problems, p string, pts []SenderRate, whole float64) {
	for i, s := range pts {
		q := fmt.Sprintf("%s.senders[%d]", p, i)
		if s.GPUs < 1 || s.GPUs > limits.MaxGPUsPerHost {
			errs.Add(q+".gpus", "must be 1..%d, got %d", limits.MaxGPUsPerHost, s.GPUs)
		} else if i > 0 && s.GPUs <= pts[i-1].GPUs {
			errs.Add(q+".gpus", "must rise from entry to entry, got %d after %d", s.GPUs, pts[i-1].GPUs)
		}
		errs.Check(q+".rate_gbit_per_s", limits.LinkGbitPerS, s.RateGbitPerS)
		if whole > 0 && s.RateGbitPerS > whole*(1+1e-9) {
			errs.Add(q+".rate_gbit_per_s", "%g is above the entry's whole rate %g Gbit/s (what all the host's GPUs sending at once reach); give that as the rate", s.RateGbitPerS, whole)
		}
	}
}

// senderShares returns, for k = 0..gpus senders, the part of whole that k
// GPUs sending at once reach: the table's points joined by straight
// lines, (gpus, whole) after the last point, and in proportion to k below
// the first; nil without a table (every k reaches the whole).
func senderShares(pts []SenderRate, whole float64, gpus int) []float64 {
	if len(pts) == 0 || whole <= 0 {
		return nil
	}
	xs := make([]float64, 0, len(pts)+1)
	ys := make([]float64, 0, len(pts)+1)
	for _, p := range pts {
		xs, ys = append(xs, float64(p.GPUs)), append(ys, p.RateGbitPerS)
	}
	if pts[len(pts)-1].GPUs < gpus {
		xs, ys = append(xs, float64(gpus)), append(ys, whole)
	}
	out := make([]float64, max(gpus, 1)+1)
	for k := range out {
		out[k] = min(1, rateAt(xs, ys, float64(max(k, 1)))/whole)
	}
	return out
}

// rateAt interpolates the points (xs rising) at x.
func rateAt(xs, ys []float64, x float64) float64 {
	switch {
	case x <= xs[0]:
		return ys[0] * x / xs[0]
	case x >= xs[len(xs)-1]:
		return ys[len(ys)-1]
	}
	i := 1
	for xs[i] < x {
		i++
	}
	t := (x - xs[i-1]) / (xs[i] - xs[i-1])
	return ys[i-1] + t*(ys[i]-ys[i-1])
}

// islandShares is the smallest share any of an island's NIC entries gives
// k senders (nil when none has a table).
func islandShares(spec IslandSpec) []float64 {
	var out []float64
	for _, n := range spec.NICs {
		out = minShares(out, senderShares(n.Senders, float64(n.Count)*n.RateGbitPerS, spec.GPUsPerHost))
	}
	return out
}

// minShares is the element-wise minimum; nil stands for all ones, and a
// shorter table continues with its last entry.
func minShares(a, b []float64) []float64 {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	out := make([]float64, max(len(a), len(b)))
	for k := range out {
		out[k] = min(a[min(k, len(a)-1)], b[min(k, len(b)-1)])
	}
	return out
}

// shareTable is each island pair's share table (islands*islands, by
// Host.Island): the smaller of both sides' NIC tables and, between
// islands, the link's. Taking the smallest share is exact when the path's
// bottleneck has it (on clusters of one NIC kind, every term). nil when no
// entry has a table, so clusters without one pay nothing.
func (f *File) shareTable(islands []Island) [][]float64 {
	ni := len(islands)
	own := make([][]float64, ni)
	has := false
	for i, isl := range islands {
		own[i] = islandShares(isl.Spec)
		has = has || own[i] != nil
	}
	for _, l := range f.Links {
		has = has || len(l.Senders) > 0
	}
	if !has {
		return nil
	}
	shares := make([][]float64, ni*ni)
	for a := range islands {
		for b := range islands {
			s := minShares(own[a], own[b])
			if a == b {
				shares[a*ni+b] = s
				continue
			}
			if l, ok := f.findLink(islands[a].Spec.Name, islands[b].Spec.Name); ok {
				g := max(islands[a].Spec.GPUsPerHost, islands[b].Spec.GPUsPerHost)
				s = minShares(s, senderShares(l.Senders, l.BandwidthGbitPerS, g))
			}
			shares[a*ni+b] = s
		}
	}
	return shares
}

// SenderShare is the part of the link from host a to host b that k GPUs
// of a host sending over it at once reach together (the NICs' and links'
// senders tables); 1 without a table, inside a host, and on clusters built
// from matrices (NewCluster).
func (c *Cluster) SenderShare(a, b, k int) float64 {
	l := c.compact
	if a == b || l == nil || l.shares == nil {
		return 1
	}
	s := l.shares[int(l.island[a])*l.islands+int(l.island[b])]
	if s == nil {
		return 1
	}
	return s[min(max(k, 0), len(s)-1)]
}

// HasSenderRates reports whether any path has a senders table.
func (c *Cluster) HasSenderRates() bool { return c.compact != nil && c.compact.shares != nil }
