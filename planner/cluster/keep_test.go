package cluster

import (
	"slices"
	"testing"
)

// Keep narrows a resolved cluster: every kept pair keeps its link (nominal
// or measured, pipeline links too), each host its island, and the islands
// list the kept hosts by their new indices.
func TestKeep(t *testing.T) {
	doc := `
clusters:
  - name: ib
    hosts: a[1-3]
    gpus_per_host: 8
    gpu: {model: A100-80GB-SXM}
    nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}]
  - name: eth
    hosts: b[1-2]
    gpus_per_host: 4
    gpu: {model: L40S}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 25}]
links:
  - {between: [ib, eth], type: ethernet, bandwidth_gbit_per_s: 10}
measured:
  measured_at: 2026-01-01T00:00:00Z
  hosts: [a3, a1, b2]
  gbit_per_s:
    - [0, 400, 7]
    - [300, 0, 0]
    - [6, 0, 0]
`
	c := mustResolve(t, doc)
	keep := []int{4, 0, 2} // b2, a1, a3
	k := c.Keep(keep)
	if len(k.Hosts) != 3 || k.TotalGPUs() != 20 || k.Hosts[0].Name != "b2" {
		t.Fatalf("kept hosts %v, %d GPUs", k.Hosts, k.TotalGPUs())
	}
	for i, a := range keep {
		for j, b := range keep {
			if got, want := k.LinkBetween(i, j), c.LinkBetween(a, b); got != want {
				t.Errorf("link %s-%s: %+v, want %+v", c.Hosts[a].Name, c.Hosts[b].Name, got, want)
			}
			if got, want := k.PipelineLinkBetween(i, j), c.PipelineLinkBetween(a, b); got != want {
				t.Errorf("pipeline link %s-%s: %+v, want %+v", c.Hosts[a].Name, c.Hosts[b].Name, got, want)
			}
		}
	}
	if !slices.Equal(k.Islands[0].Hosts, []int{1, 2}) || !slices.Equal(k.Islands[1].Hosts, []int{0}) {
		t.Errorf("islands list %v and %v, want [1 2] and [0]", k.Islands[0].Hosts, k.Islands[1].Hosts)
	}
	// A cluster of full matrices (NewCluster) narrows the same way.
	bw := [][]float64{{0, 1, 2}, {3, 0, 4}, {5, 6, 0}}
	lat := [][]float64{{0, .1, .2}, {.3, 0, .4}, {.5, .6, 0}}
	m := NewCluster([]Island{{Hosts: []int{0, 1, 2}}}, []Host{{GPUs: 1}, {GPUs: 2}, {GPUs: 4}}, bw, lat)
	n := m.Keep([]int{2, 1})
	if l := n.LinkBetween(0, 1); l.BytesPerS != 6 || l.LatencyS != .6 || n.TotalGPUs() != 6 {
		t.Errorf("matrix cluster narrowed: link %+v, %d GPUs; want 6 B/s, 0.6 s, 6 GPUs", l, n.TotalGPUs())
	}
}
