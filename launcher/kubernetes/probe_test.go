package kubernetes

import (
	"encoding/json"
	"strings"
	"testing"
)

// nodesJSON is a `kubectl get nodes -o json` as a cluster with NVIDIA's GPU
// feature discovery reports it: two H100 nodes with RDMA, one L40S node,
// one CPU-only node.
const nodesJSON = `{"items": [
 {"metadata": {"name": "gpu-a1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "feature.node.kubernetes.io/rdma.available": "true"}},
  "status": {"allocatable": {"cpu": "112", "memory": "2113464472Ki", "nvidia.com/gpu": "8"}}},
 {"metadata": {"name": "gpu-a2", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8", "feature.node.kubernetes.io/rdma.available": "true"}},
  "status": {"allocatable": {"cpu": "112", "memory": "2113464472Ki", "nvidia.com/gpu": "8"}}},
 {"metadata": {"name": "gpu-b1", "labels": {"nvidia.com/gpu.product": "NVIDIA-L40S"}},
  "status": {"allocatable": {"cpu": "64", "memory": "768Gi", "nvidia.com/gpu": "4"}}},
 {"metadata": {"name": "cpu-1", "labels": {}}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi"}}},
 {"metadata": {"name": "gpu-x", "labels": {}}, "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}}}
]}`

func TestIslandsFromNodes(t *testing.T) {
	var list struct{ Items []nodeInfo }
	if err := json.Unmarshal([]byte(nodesJSON), &list); err != nil {
		t.Fatal(err)
	}
	f, notes, err := islandsFromNodes(list.Items, "nvidia.com/gpu")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Clusters) != 2 {
		t.Fatalf("islands = %+v, want H100 and L40S", f.Clusters)
	}
	cases := []struct {
		island, model, nic string
		hosts, gpus, cpus  int
	}{
		{"nvidia-h100-80gb-hbm3", "H100-SXM", "infiniband", 2, 8, 112},
		{"nvidia-l40s", "L40S", "ethernet", 1, 4, 64},
	}
	for i, c := range cases {
		isl := f.Clusters[i]
		if isl.Name != c.island || !strings.Contains(isl.GPU.Model, c.model) || len(isl.Hosts) != c.hosts ||
			isl.GPUsPerHost != c.gpus || isl.CPUCores != c.cpus || string(isl.NICs[0].Type) != c.nic {
			t.Errorf("island %d = %+v, want %+v", i, isl, c)
		}
	}
	if got := f.Clusters[1].HostMemoryGiB; got != 768 {
		t.Errorf("L40S host memory %g GiB, want 768", got)
	}
	if _, err := f.Resolve(); err != nil {
		t.Errorf("probed cluster does not resolve: %v", err)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "intra-host bus") || !strings.Contains(strings.Join(notes, "\n"), "node gpu-x has 2 GPUs but no nvidia.com/gpu.product") {
		t.Errorf("notes do not say what is unknown: %q", notes)
	}
	if _, _, err := islandsFromNodes(list.Items[3:], "nvidia.com/gpu"); err == nil || !strings.Contains(err.Error(), "device plugin") || !strings.Contains(err.Error(), "gpu-x") {
		t.Errorf("no GPU node: err = %v", err)
	}
}
