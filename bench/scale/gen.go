package main

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Kinds are the generated cluster shapes of the scale benchmark.
var Kinds = []string{"homogeneous", "three-islands", "measured-matrix"}

// Sizes are the benchmark's GPU counts (8 GPUs per host).
var Sizes = []struct {
	Name  string
	Hosts int
}{{"1k", 128}, {"4k", 512}, {"16k", 2048}, {"64k", 8192}}

// Generate builds a cluster file of the given kind with hosts hosts:
//
//   - homogeneous: one island of H100 SXM hosts on 8x400 Gbit/s InfiniBand;
//   - three-islands: half H100 on InfiniBand, a quarter A100 on RoCE, a
//     quarter L40S on Ethernet, 8 GPUs a host, 100 Gbit/s between the H100
//     and A100 islands and 50 Gbit/s from either to the L40S island;
//   - measured-matrix: three-islands plus a measured host-to-host matrix:
//     racks of 32 hosts reach hosts in other racks of their island at 80%
//     of the NIC rate, and one host in 64 has a degraded NIC at half rate.
//
// Measured rows of hosts that measure alike share one backing slice, so a
// generated 8,192-host matrix costs megabytes, not half a gigabyte.
func Generate(kind string, hosts int) (*cluster.File, error) {
	switch kind {
	case "homogeneous":
		return &cluster.File{Clusters: []cluster.IslandSpec{h100Island(hosts)}}, nil
	case "three-islands":
		return threeIslands(hosts), nil
	case "measured-matrix":
		f := threeIslands(hosts)
		f.Measured = measured(f)
		return f, nil
	}
	return nil, fmt.Errorf("cluster kind %q: want one of %v", kind, Kinds)
}

func names(prefix string, n int) cluster.HostEntries {
	out := make(cluster.HostEntries, n)
	for i := range out {
		out[i] = cluster.HostEntry{Name: fmt.Sprintf("%s-%05d", prefix, i)}
	}
	return out
}

func h100Island(n int) cluster.IslandSpec {
	return cluster.IslandSpec{Name: "h100", Hosts: names("h100", n), GPUsPerHost: 8,
		GPU: gpu.Spec{Model: "H100-SXM"}, IntraHost: cluster.IntraHostBus{Type: "nvswitch"},
		NICs: []cluster.NICSpec{
			{Type: cluster.NICInfiniBand, Count: 8, RateGbitPerS: 400},
			{Type: cluster.NICEthernet, Count: 2, RateGbitPerS: 100},
		},
		HostMemoryGiB: 2048, CPUCores: 112, PCIeGen: 5}
}

func threeIslands(hosts int) *cluster.File {
	q := hosts / 4
	h := h100Island(hosts - 2*q)
	a := cluster.IslandSpec{Name: "a100", Hosts: names("a100", q), GPUsPerHost: 8,
		GPU: gpu.Spec{Model: "A100-80GB-SXM"}, IntraHost: cluster.IntraHostBus{Type: "nvswitch"},
		NICs:          []cluster.NICSpec{{Type: cluster.NICRoCE, Count: 4, RateGbitPerS: 200}},
		HostMemoryGiB: 1024, CPUCores: 128, PCIeGen: 4}
	l := cluster.IslandSpec{Name: "l40s", Hosts: names("l40s", q), GPUsPerHost: 8,
		GPU: gpu.Spec{Model: "L40S"}, IntraHost: cluster.IntraHostBus{Type: "pcie"},
		NICs:          []cluster.NICSpec{{Type: cluster.NICEthernet, Count: 2, RateGbitPerS: 100}},
		HostMemoryGiB: 768, CPUCores: 64, PCIeGen: 4}
	return &cluster.File{
		Clusters: []cluster.IslandSpec{h, a, l},
		Links: []cluster.LinkSpec{
			{Between: [2]string{"h100", "a100"}, Type: cluster.NICEthernet, BandwidthGbitPerS: 100},
			{Between: [2]string{"h100", "l40s"}, Type: cluster.NICEthernet, BandwidthGbitPerS: 50},
			{Between: [2]string{"a100", "l40s"}, Type: cluster.NICEthernet, BandwidthGbitPerS: 50},
		},
	}
}

// Gbit/s a host sends at under sockets (what plan prices for three
// islands that share no RDMA fabric): the islands' Ethernet aggregates and
// the inter-island links above.
var ethGbit = map[string]float64{"h100": 200, "a100": 800, "l40s": 200}

const rackHosts = 32

func measured(f *cluster.File) *cluster.MeasuredBandwidth {
	type host struct {
		name, island string
		rack         int
		degraded     bool
	}
	var hs []host
	for _, isl := range f.Clusters {
		for i, e := range isl.Hosts {
			hs = append(hs, host{name: e.Name, island: isl.Name, rack: i / rackHosts, degraded: i%64 == 63})
		}
	}
	inter := map[[2]string]float64{}
	for _, l := range f.Links {
		inter[[2]string{l.Between[0], l.Between[1]}] = l.BandwidthGbitPerS
		inter[[2]string{l.Between[1], l.Between[0]}] = l.BandwidthGbitPerS
	}
	rate := func(a, b host) float64 {
		var g float64
		switch {
		case a.island != b.island:
			g = inter[[2]string{a.island, b.island}]
		case a.rack == b.rack:
			g = ethGbit[a.island]
		default:
			g = 0.8 * ethGbit[a.island]
		}
		if a.degraded || b.degraded {
			g /= 2
		}
		return g
	}
	m := &cluster.MeasuredBandwidth{Tool: "generated", Hosts: make([]string, len(hs)), GbitPerS: make([][]float64, len(hs))}
	rows := map[string][]float64{}
	for i, a := range hs {
		m.Hosts[i] = a.name
		key := fmt.Sprint(a.island, a.rack, a.degraded)
		row, ok := rows[key]
		if !ok {
			row = make([]float64, len(hs))
			for j, b := range hs {
				row[j] = rate(a, b)
			}
			rows[key] = row
		}
		m.GbitPerS[i] = row
	}
	return m
}
