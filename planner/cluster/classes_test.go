package cluster

import (
	"slices"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// TestHostClasses: hosts fall in one class when GPU and intra-host link
// agree, numbered by first appearance, each represented by its first
// host; a host's own intra-host latency (SetIntraHostLatency, after the
// classes were asked for) splits it off; a Cluster literal, with no cache,
// gives the same answer.
func TestHostClasses(t *testing.T) {
	h100, _ := gpu.Lookup("H100-SXM")
	a100, _ := gpu.Lookup("A100-SXM4-80GB")
	hosts := []Host{
		{GPUs: 8, GPU: h100, IntraBytesPerS: 450e9},
		{GPUs: 8, GPU: a100, IntraBytesPerS: 300e9},
		{GPUs: 8, GPU: h100, IntraBytesPerS: 450e9},
		{GPUs: 8, GPU: h100, IntraBytesPerS: 200e9}, // the same GPU, a slower intra link
		{GPUs: 8, GPU: a100, IntraBytesPerS: 300e9},
	}
	n := len(hosts)
	bw, lat := make([][]float64, n), make([][]float64, n)
	for i := range bw {
		bw[i], lat[i] = make([]float64, n), make([]float64, n)
	}
	c := NewCluster([]Island{{Hosts: []int{0, 1, 2, 3, 4}}}, hosts, bw, lat)
	check := func(c *Cluster, wantOf, wantReps []int) {
		t.Helper()
		of, reps := c.HostClasses()
		if !slices.Equal(of, wantOf) || !slices.Equal(reps, wantReps) {
			t.Errorf("HostClasses = %v, %v; want %v, %v", of, reps, wantOf, wantReps)
		}
	}
	check(c, []int{0, 1, 0, 2, 1}, []int{0, 1, 3})
	check(&Cluster{Islands: c.Islands, Hosts: hosts, bw: bw, lat: lat}, []int{0, 1, 0, 2, 1}, []int{0, 1, 3})
	c.SetIntraHostLatency([]float64{5e-6, 5e-6, 9e-6, 5e-6, 5e-6})
	check(c, []int{0, 1, 2, 3, 1}, []int{0, 1, 2, 3})
	if got := BestLink(c, 8).BytesPerS; got != 450e9 {
		t.Errorf("BestLink over the classes' intra links = %g, want the fastest, 450e9", got)
	}
}
