package templates

import (
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner"
)

// Test clusters are built by hand with planner.NewCluster so these tests do
// not depend on the cluster-file parser or the search.

func gid(i int) *int { return &i }

func ibNICs() []planner.NICSpec {
	return []planner.NICSpec{
		{Type: planner.NICInfiniBand, Count: 2, RateGbitPerS: 200, Devices: []string{"mlx5_0:1", "mlx5_1:1"}, Netdevs: []string{"ib0", "ib1"}},
		{Type: planner.NICEthernet, Count: 1, RateGbitPerS: 25, Netdevs: []string{"eno1"}},
	}
}

func rocenNICs() []planner.NICSpec {
	return []planner.NICSpec{
		{Type: planner.NICRoCE, Count: 1, RateGbitPerS: 100, Devices: []string{"mlx5_2:1"}, Netdevs: []string{"ens1f0"}, GIDIndex: gid(3)},
	}
}

func ethNICs(rate float64) []planner.NICSpec {
	return []planner.NICSpec{{Type: planner.NICEthernet, Count: 1, RateGbitPerS: rate, Netdevs: []string{"eth0"}}}
}

// islandDef describes one island for newTestCluster.
type islandDef struct {
	name, fabric string
	hosts        []string
	gpus         int
	gpu          string
	nics         []planner.NICSpec
}

func newTestCluster(defs ...islandDef) *planner.Cluster {
	var islands []planner.Island
	var hosts []planner.Host
	for i, d := range defs {
		is := planner.Island{Spec: planner.IslandSpec{Name: d.name, GPUsPerHost: d.gpus, GPU: planner.GPUSpec{Model: d.gpu}, NICs: d.nics, Fabric: d.fabric}}
		for _, n := range d.nics {
			if n.Type.RDMA() {
				is.RDMA = true
			}
		}
		for j, h := range d.hosts {
			is.Hosts = append(is.Hosts, len(hosts))
			hosts = append(hosts, planner.Host{
				HostEntry: planner.HostEntry{Name: h, Address: "198.18." + itoa(i) + "." + itoa(10+j)},
				Island:    i, GPUs: d.gpus, GPU: planner.GPUSpec{Model: d.gpu, MemoryGiB: 80},
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
	return planner.NewCluster(islands, hosts, bw, lat)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// placeInOrder puts ranks on hosts in order, gpusPerHost[i] ranks on the
// i-th listed host; gpuOf maps a local rank to the physical GPU.
func placeInOrder(c *planner.Cluster, hostIdx []int, perHost int, gpuOf func(local int) int) []planner.RankPlacement {
	var pl []planner.RankPlacement
	for k, h := range hostIdx {
		for l := range perHost {
			pl = append(pl, planner.RankPlacement{Rank: k*perHost + l, Host: c.Hosts[h].Name, HostIndex: h, LocalRank: l, GPU: gpuOf(l)})
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
