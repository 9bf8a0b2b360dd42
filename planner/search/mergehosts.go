package search

import (
	"fmt"
	"math"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// uniformGPUsPerHost is the GPU count every host has, or 0 when they differ.
func uniformGPUsPerHost(c *cluster.Cluster) int {
	g := c.Hosts[0].GPUs
	for _, h := range c.Hosts {
		if h.GPUs != g {
			return 0
		}
	}
	return g
}

// mergeHosts groups every k consecutive hosts; groups[i] are the real
// hosts of merged host i. It fails when hosts differ in GPUs or GPU model
// inside a group, a group straddles islands, or k does not divide the
// host count.
func mergeHosts(c *cluster.Cluster, k int) (*cluster.Cluster, [][]int, error) {
	n := len(c.Hosts)
	g := uniformGPUsPerHost(c)
	switch {
	case g == 0:
		return nil, nil, fmt.Errorf("tensor parallelism across hosts needs the same GPU count on every host")
	case n%k != 0:
		return nil, nil, fmt.Errorf("tensor parallel size %d spans %d hosts, which does not divide the %d hosts", k*g, k, n)
	}
	groups := make([][]int, n/k)
	hosts := make([]cluster.Host, n/k)
	for i := range groups {
		grp := make([]int, k)
		for j := range grp {
			grp[j] = i*k + j
		}
		groups[i] = grp
		first := c.Hosts[grp[0]]
		h := first
		h.GPUs = k * g
		h.MemoryBytes, h.NICBytesPerS, h.CPUCores, h.HostMemBytesPerS = 0, 0, 0, 0
		tpBW := first.IntraBytesPerS
		for _, r := range grp {
			x := c.Hosts[r]
			if x.GPU != first.GPU || x.Island != first.Island {
				return nil, nil, fmt.Errorf("tensor parallel size %d spans hosts %s and %s, which differ in GPU model or island", k*g, first.Name, x.Name)
			}
			h.MemoryBytes += x.MemoryBytes
			h.NICBytesPerS += x.NICBytesPerS
			h.CPUCores += x.CPUCores
			h.HostMemBytesPerS += x.HostMemBytesPerS
			tpBW = math.Min(tpBW, x.IntraBytesPerS)
			for _, o := range grp {
				if o != r {
					tpBW = math.Min(tpBW, c.LinkBetween(r, o).BytesPerS)
				}
			}
		}
		h.IntraBytesPerS = tpBW
		hosts[i] = h
	}
	bw := make([][]float64, len(groups))
	lat := make([][]float64, len(groups))
	intraLat := make([]float64, len(groups))
	for a := range groups {
		bw[a] = make([]float64, len(groups))
		lat[a] = make([]float64, len(groups))
		for b := range groups {
			worst, l := math.Inf(1), 0.0
			for _, x := range groups[a] {
				for _, y := range groups[b] {
					if x != y {
						lk := c.LinkBetween(x, y)
						worst = math.Min(worst, lk.BytesPerS)
						l = math.Max(l, lk.LatencyS)
					}
				}
			}
			if a == b {
				intraLat[a] = l
				continue
			}
			bw[a][b], lat[a][b] = worst*float64(k), l
		}
	}
	islands := make([]cluster.Island, len(c.Islands))
	for i, isl := range c.Islands {
		islands[i] = cluster.Island{Spec: isl.Spec, RDMA: isl.RDMA}
		islands[i].Spec.GPUsPerHost = k * g
	}
	for i, h := range hosts {
		islands[h.Island].Hosts = append(islands[h.Island].Hosts, i)
	}
	mc := cluster.NewCluster(islands, hosts, bw, lat)
	mc.SetIntraHostLatency(intraLat)
	return mc, groups, nil
}
