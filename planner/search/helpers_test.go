package search

import (
	"math"
	"math/rand/v2"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

// GPU figures from NVIDIA's datasheets (dense bf16, HBM bandwidth).
var (
	gpuA100 = gpu.Spec{Model: "A100-SXM4-80GB", MemoryGiB: 80, PeakTFLOPS: 312, MemoryBandwidthTBPerS: 2.039}
	gpuH100 = gpu.Spec{Model: "H100-SXM5-80GB", MemoryGiB: 80, PeakTFLOPS: 989, MemoryBandwidthTBPerS: 3.35}
	gpuA10  = gpu.Spec{Model: "A10", MemoryGiB: 24, PeakTFLOPS: 125, MemoryBandwidthTBPerS: 0.6}
)

var gpt3_175b = model.Model{Name: "gpt3-175b", NumLayers: 96, Hidden: 12288, Heads: 96, SeqLength: 2048, Vocab: 51200}

// islandDef is a test island: hosts x gpus, intra-host bus GB/s, NIC Gbit/s.
type islandDef struct {
	hosts, gpus int
	gpu         gpu.Spec
	intraGBs    float64
	nicGbit     float64
}

// testCluster builds a cluster of islands; hosts inside an island reach each
// other at their NIC rate, islands reach each other at interGbit.
func testCluster(defs []islandDef, interGbit float64) *cluster.Cluster {
	var islands []cluster.Island
	var hosts []cluster.Host
	for i, d := range defs {
		isl := cluster.Island{Spec: cluster.IslandSpec{Name: string(rune('a' + i)), GPUsPerHost: d.gpus, GPU: d.gpu}, RDMA: true}
		for k := 0; k < d.hosts; k++ {
			isl.Hosts = append(isl.Hosts, len(hosts))
			hosts = append(hosts, cluster.Host{
				HostEntry: cluster.HostEntry{Name: isl.Spec.Name + string(rune('0'+k/10)) + string(rune('0'+k%10))},
				Island:    i, GPUs: d.gpus, GPU: d.gpu,
				IntraBytesPerS: d.intraGBs * 1e9, NICBytesPerS: d.nicGbit / 8 * 1e9,
				MemoryBytes: 1 << 40, PCIeBytesPerS: 25e9, CPUCores: 64, HostMemBytesPerS: 100e9,
			})
		}
		islands = append(islands, isl)
	}
	n := len(hosts)
	bw := make([][]float64, n)
	lat := make([][]float64, n)
	for a := range bw {
		bw[a] = make([]float64, n)
		lat[a] = make([]float64, n)
		for b := range bw[a] {
			if hosts[a].Island == hosts[b].Island {
				bw[a][b], lat[a][b] = hosts[a].NICBytesPerS, 5e-6
			} else {
				bw[a][b], lat[a][b] = interGbit/8*1e9, 50e-6
			}
		}
	}
	return cluster.NewCluster(islands, hosts, bw, lat)
}

// randomCluster is n hosts of gpus GPUs with a random symmetric
// heterogeneous bandwidth matrix (1..200 Gbit/s, a few fast pairs).
func randomCluster(n, gpus int, seed uint64) *cluster.Cluster {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := testCluster([]islandDef{{hosts: n, gpus: gpus, gpu: gpuA100, intraGBs: 300, nicGbit: 200}}, 0)
	bw, _ := c.Matrices()
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			g := 1 + rng.Float64()*199
			bw[a][b], bw[b][a] = g/8*1e9, g/8*1e9
		}
		if rng.IntN(3) == 0 { // a slower GPU now and then
			c.Hosts[a].GPU = gpuA10
		}
	}
	return c
}

// approx reports whether a and b agree within rel of the larger magnitude.
func approx(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }
