package examples

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

func TestDefaultClusterResolves(t *testing.T) {
	f, err := cluster.Parse(DefaultCluster)
	if err != nil {
		t.Fatalf("embedded cluster.yaml: %v", err)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatalf("embedded cluster.yaml: %v", err)
	}
	if c.TotalGPUs() != 32 {
		t.Errorf("embedded cluster has %d GPUs, want 32 (4 x 8 A100)", c.TotalGPUs())
	}
}
