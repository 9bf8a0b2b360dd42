package measure

import (
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// TestRecordedH200Compute: the compute sweep's real output on one H200
// (testdata/PROVENANCE.md; one worker, so no all-reduce) parses into the
// cluster file's measured compute, which loads, and whose GEMMs ran
// MeasuredScale times the cost model's Hopper rate: above 1, as
// docs/cost-model.md says of Megatron bf16 on Hopper (the 16-bit curve is
// fitted to llm-foundry's whole steps, isolated cuBLAS GEMMs run faster).
func TestRecordedH200Compute(t *testing.T) {
	raw, err := os.ReadFile("testdata/recorded/h200-vm.compute.txt")
	if err != nil {
		t.Fatal(err)
	}
	hc, torch, err := ParseComputeOutput("vm1", string(raw), 1)
	if err != nil {
		t.Fatal(err)
	}
	if hc.Device != "cuda: NVIDIA H200" || torch != "2.11.0+cu130" || len(hc.GEMM) != 12 || hc.AllReduceBusGBytePerS != 0 {
		t.Fatalf("parsed %+v (torch %s), want 12 bf16 GEMMs of an H200 and no all-reduce", hc, torch)
	}
	lo, hi := hc.GEMM[0].TFLOPS, hc.GEMM[0].TFLOPS
	for _, s := range hc.GEMM {
		lo, hi = min(lo, s.TFLOPS), max(hi, s.TFLOPS)
	}
	spec, ok := gpu.Lookup("NVIDIA H200")
	if !ok {
		t.Fatal("the catalog has no H200")
	}
	scale, n, ok := cluster.MeasuredScale(spec, hc)
	if !ok || n != 12 || scale <= 1 {
		t.Errorf("MeasuredScale %.3f over %d samples, want above 1 over 12", scale, n)
	}
	t.Logf("bf16 GEMMs %.0f-%.0f TFLOP/s (%.2f-%.2f of the %.0f peak); measured / modelled rate %.3f", lo, hi, lo/spec.PeakTFLOPS, hi/spec.PeakTFLOPS, spec.PeakTFLOPS, scale)
	f := &cluster.File{Clusters: []cluster.IslandSpec{{Name: "vm", Hosts: cluster.HostEntries{{Name: "vm1"}}, GPUsPerHost: 1, GPU: spec,
		NICs: []cluster.NICSpec{{Type: cluster.NICEthernet, Count: 1, RateGbitPerS: 25}}}},
		MeasuredCompute: &cluster.MeasuredCompute{Tool: "torch " + torch, Hosts: []cluster.HostCompute{hc}}}
	data, err := f.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Parse(data); err != nil {
		t.Errorf("a cluster file with the recorded compute is refused: %v\n%s", err, data)
	}
}
