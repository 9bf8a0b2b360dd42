package templates

import (
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// Test clusters are built by hand with cluster.NewCluster so these tests do
// not depend on the cluster-file parser or the search.

func gid(i int) *int { return &i }

func ibNICs() []cluster.NICSpec {
	return []cluster.NICSpec{
		{Type: cluster.NICInfiniBand, Count: 2, RateGbitPerS: 200, Devices: []string{"mlx5_0:1", "mlx5_1:1"}, Netdevs: []string{"ib0", "ib1"}},
		{Type: cluster.NICEthernet, Count: 1, RateGbitPerS: 25, Netdevs: []string{"eno1"}},
	}
}

func rocenNICs() []cluster.NICSpec {
	return []cluster.NICSpec{
		{Type: cluster.NICRoCE, Count: 1, RateGbitPerS: 100, Devices: []string{"mlx5_2:1"}, Netdevs: []string{"ens1f0"}, GIDIndex: gid(3)},
	}
}

func ethNICs(rate float64) []cluster.NICSpec {
	return []cluster.NICSpec{{Type: cluster.NICEthernet, Count: 1, RateGbitPerS: rate, Netdevs: []string{"eth0"}}}
}

// islandDef describes one island for newTestCluster.
type islandDef struct {
	name, fabric string
	hosts        []string
	gpus         int
	gpu          string
	nics         []cluster.NICSpec
}

func newTestCluster(defs ...islandDef) *cluster.Cluster {
	var islands []cluster.Island
	var hosts []cluster.Host
	for i, d := range defs {
		is := cluster.Island{Spec: cluster.IslandSpec{Name: d.name, GPUsPerHost: d.gpus, GPU: gpu.Spec{Model: d.gpu}, NICs: d.nics, Fabric: d.fabric}}
		for _, n := range d.nics {
			if n.Type.RDMA() {
				is.RDMA = true
			}
		}
		for j, h := range d.hosts {
			is.Hosts = append(is.Hosts, len(hosts))
			hosts = append(hosts, cluster.Host{
				HostEntry: cluster.HostEntry{Name: h, Address: "198.18." + itoa(i) + "." + itoa(10+j)},
				Island:    i, GPUs: d.gpus, GPU: gpu.Spec{Model: d.gpu, MemoryGiB: 80},
			})
		}
		islands = append(islands, is)
	}
	n := len(hosts)
	bw, lat := make([][]float64, n), make([][]float64, n)
	for i := range bw {
		bw[i], lat[i] = make([]float64, n), make([]float64, n)
		for j := range bw[i] {
			bw[i][j], lat[i][j] = 1e9, 1e-5
		}
	}
	return cluster.NewCluster(islands, hosts, bw, lat)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// placeInOrder puts ranks on hosts in order, gpusPerHost[i] ranks on the
// i-th listed host; gpuOf maps a local rank to the physical GPU.
func placeInOrder(c *cluster.Cluster, hostIdx []int, perHost int, gpuOf func(local int) int) []search.RankPlacement {
	var pl []search.RankPlacement
	for k, h := range hostIdx {
		for l := range perHost {
			pl = append(pl, search.RankPlacement{Rank: k*perHost + l, Host: c.Hosts[h].Name, HostIndex: h, LocalRank: l, GPU: gpuOf(l)})
		}
	}
	return pl
}

func identity(l int) int { return l }

// gpt24 is the shape of the Megatron arguments below.
var gpt24Args = []string{
	"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
	"--seq-length", "2048", "--max-position-embeddings", "2048", "--bf16",
	"--lr", "3e-4", "--train-iters", "1000", "--data-path", "my data/gpt_text_document",
}

var gpt48Args = []string{
	"--num-layers", "48", "--hidden-size", "6144", "--num-attention-heads", "48",
	"--group-query-attention", "--num-query-groups", "8",
	"--seq-length", "4096", "--max-position-embeddings", "4096", "--bf16", "--swiglu",
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
