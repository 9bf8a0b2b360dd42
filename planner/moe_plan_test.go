package planner

import (
	"testing"
)

// h100Cluster64 is 8 DGX H100 hosts (NVSwitch 450 GB/s, 8x400 Gbit/s IB).
func h100Cluster64() *Cluster {
	return testCluster([]islandDef{{hosts: 8, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200}}, 0)
}

func TestMoEPlanMixtralOn64H100(t *testing.T) {
	m, _ := Preset("mixtral-8x7b")
	res, err := Search(h100Cluster64(), m, SearchOptions{Framework: FrameworkMegatron, GlobalBatch: 256, Seed: 1, TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Plans {
		t.Logf("TP%d PP%d DP%d CP%d VPP%d EP%d ETP%d mb%d %s distopt=%v: %.3f s, %.0f tok/s/GPU, %.1f GiB, MFU-ish %.0f TFLOPS",
			p.TP, p.PP, p.DP, p.CP, p.VPP, p.EP, p.ETP, p.MicroBatch, p.Recompute, p.DistributedOptimizer,
			p.Predicted.IterationSeconds, p.Predicted.TokensPerSecond/64, p.Memory.PeakBytesPerGPU/gib, p.Predicted.TFLOPSPerGPU)
	}
	t.Logf("considered %d", res.Considered)
}
