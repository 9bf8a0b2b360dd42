package planner

import (
	"fmt"
	"testing"
)

func TestDebugPrint(t *testing.T) {
	for _, c := range []*Cluster{
		testCluster([]islandDef{{hosts: 128, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0),
		testCluster([]islandDef{{hosts: 4, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200}, {hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 100),
	} {
		res, err := Search(c, gpt3_175b, SearchOptions{GlobalBatch: 1536, TopK: 5, Seed: 1, Fixed: Constraints{ZeroStage: -1}})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println("considered", res.Considered, res.RejectedMemory)
		for _, p := range res.Plans {
			fmt.Printf("tp%d pp%d dp%d v%d mb%d %s do=%v off=%v layers=%v iter=%.3f tflops=%.1f bubble=%.3f mem=%.1f/%.1f %+v\n", p.TP, p.PP, p.DP, p.VPP, p.MicroBatch, p.Recompute, p.DistributedOptimizer, p.Offload, p.StageLayers, p.Predicted.IterationSeconds, p.Predicted.TFLOPSPerGPU, p.Predicted.BubbleFraction, p.Memory.PeakBytesPerGPU/gib, p.Memory.GPUCapacityBytes/gib, p.Predicted.Breakdown)
		}
	}
}
