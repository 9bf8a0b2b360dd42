package cluster

import (
	"math"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// HostSymmetry puts hosts that can be swapped without changing any cost in
// one class: same GPUs, GPU model, intra-host link and links to every
// other host. Hosts of a resolved file that the measured matrix does not
// mention are classed by island in O(1) each (their links are their
// island's); other hosts are bucketed by a hash of the multiset of their
// links (equal for interchangeable hosts) and compared in full only within
// a bucket, so the cost is O(n) links per such host, not per pair.
func HostSymmetry(c *Cluster) []int {
	n := len(c.Hosts)
	cls := make([]int, n)
	same := func(i, j int) bool {
		a, b := c.Hosts[i], c.Hosts[j]
		if a.GPUs != b.GPUs || a.GPU != b.GPU || c.LinkBetween(i, i) != c.LinkBetween(j, j) ||
			c.LinkBetween(i, j) != c.LinkBetween(j, i) {
			return false
		}
		for k := 0; k < n; k++ {
			if k == i || k == j {
				continue
			}
			if c.LinkBetween(i, k) != c.LinkBetween(j, k) || c.LinkBetween(k, i) != c.LinkBetween(k, j) {
				return false
			}
		}
		return true
	}
	type key struct {
		island, gpus int
		gpu          gpu.Spec
		intra        Link
		links        uint64
	}
	buckets := map[key][]int{} // representatives per key
	next := 0
	for i, h := range c.Hosts {
		k := key{island: -1, gpus: h.GPUs, gpu: h.GPU, intra: c.LinkBetween(i, i)}
		if c.compact != nil && (c.compact.mn == 0 || c.compact.mrow[i] < 0) {
			k.island = h.Island
			if reps := buckets[k]; len(reps) > 0 {
				cls[i] = cls[reps[0]]
				continue
			}
			buckets[k] = []int{i}
			cls[i] = next
			next++
			continue
		}
		k.links = linkMultisetHash(c, i)
		cls[i] = -1
		for _, r := range buckets[k] {
			if same(i, r) {
				cls[i] = cls[r]
				break
			}
		}
		if cls[i] < 0 {
			buckets[k] = append(buckets[k], i)
			cls[i] = next
			next++
		}
	}
	return cls
}

// linkMultisetHash hashes the multiset of (out, in) links of host i to
// every other host: order-free, so interchangeable hosts hash alike.
func linkMultisetHash(c *Cluster, i int) uint64 {
	var sum uint64
	for k := range c.Hosts {
		if k == i {
			continue
		}
		out, in := c.LinkBetween(i, k), c.LinkBetween(k, i)
		x := math.Float64bits(out.BytesPerS)*0x9e3779b97f4a7c15 ^ math.Float64bits(out.LatencyS)*0xc2b2ae3d27d4eb4f ^
			math.Float64bits(in.BytesPerS)*0x165667b19e3779f9 ^ math.Float64bits(in.LatencyS)*0x27d4eb2f165667c5
		x ^= x >> 29
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 32
		sum += x
	}
	return sum
}
