package search

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// BenchmarkPlan1024GPUs is the full search (enumeration, memory, latency
// model, placement of the best candidates) for a 175B model on 128 DGX
// A100 hosts (8 GPUs on NVSwitch at 300 GB/s, 8x200 Gbit/s InfiniBand).
// Target: < 1 s/op on a 2-core machine.
func BenchmarkPlan1024GPUs(b *testing.B) {
	c := testCluster([]islandDef{{hosts: 128, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 1536, TopK: 10, Seed: 1}
	for i := 0; i < b.N; i++ {
		res, err := Search(c, gpt3_175b, o)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Plans) == 0 {
			b.Fatal("no plans")
		}
	}
}

// BenchmarkPlanTwoIslands is the heterogeneous case: 16 H100 hosts and 16
// A100 hosts joined by 100 Gbit/s Ethernet.
func BenchmarkPlanTwoIslands(b *testing.B) {
	c := testCluster([]islandDef{
		{hosts: 16, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200},
		{hosts: 16, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600},
	}, 100)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 1024, TopK: 10, Seed: 1}
	for i := 0; i < b.N; i++ {
		if _, err := Search(c, gpt3_175b, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan1024GPUsHeterogeneous: the same search on 128 hosts in four
// islands (two A100, two H100) with per-pair bandwidth noise inside islands
// and 100 Gbit/s between them, so every host differs and placement runs its
// local search for every placed candidate.
func BenchmarkPlan1024GPUsHeterogeneous(b *testing.B) {
	c := testCluster([]islandDef{
		{hosts: 32, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600},
		{hosts: 32, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200},
		{hosts: 32, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 800},
		{hosts: 32, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 1600},
	}, 100)
	bw, _ := c.Matrices()
	for a := range bw {
		for k := a + 1; k < len(bw); k++ {
			f := 0.7 + 0.3*float64((a*31+k*17)%97)/97
			bw[a][k] *= f
			bw[k][a] = bw[a][k]
		}
	}
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 1536, TopK: 10, Seed: 1}
	for i := 0; i < b.N; i++ {
		if _, err := Search(c, gpt3_175b, o); err != nil {
			b.Fatal(err)
		}
	}
}
