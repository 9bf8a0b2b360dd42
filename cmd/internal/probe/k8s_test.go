package probe

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/kubernetes"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/testbed/kube"
)

// TestProbeKubernetesNodes: probe --launcher k8s on a real control plane
// reads the GPU nodes (kwok nodes labelled as GPU feature discovery does)
// into a cluster file that parses and groups them by GPU product, and
// says what the API cannot tell.
func TestProbeKubernetesNodes(t *testing.T) {
	s := kube.New(t, kube.Kwok)
	nodes := `
apiVersion: v1
kind: Node
metadata:
  name: h100-a
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
status:
  allocatable: {cpu: "112", memory: 2Ti, pods: "110", nvidia.com/gpu: "8"}
  capacity: {cpu: "112", memory: 2Ti, pods: "110", nvidia.com/gpu: "8"}
---
apiVersion: v1
kind: Node
metadata:
  name: l40s-a
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {type: kwok, nvidia.com/gpu.product: NVIDIA-L40S}
status:
  allocatable: {cpu: "64", memory: 768Gi, pods: "110", nvidia.com/gpu: "4"}
  capacity: {cpu: "64", memory: 768Gi, pods: "110", nvidia.com/gpu: "4"}
`
	if _, err := s.Kubectl(context.Background(), []byte(nodes), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "cluster.yaml")
	var stdout, stderr bytes.Buffer
	err := Run(&Options{IO: &cmdutil.IOStreams{Out: &stdout, ErrOut: &stderr}, Launcher: "k8s", Output: out,
		K8s: K8sOptions{Kubectl: kubernetes.Kubectl{Path: filepath.Join(s.Bin, "kubectl"), Kubeconfig: s.Kubeconfig}, GPUResource: "nvidia.com/gpu"}})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("probed cluster file does not parse: %v\n%s", err, data)
	}
	islands := map[string]string{}
	for _, isl := range f.Clusters {
		for _, h := range isl.Hosts {
			islands[h.Name] = isl.GPU.Model
		}
	}
	// The up.sh kwok nodes have GPUs but no product label: left out, with a note.
	if !strings.Contains(islands["h100-a"], "H100") || islands["l40s-a"] != "L40S" || len(f.Clusters) != 2 {
		t.Errorf("islands = %v (%d clusters)\n%s", islands, len(f.Clusters), data)
	}
	if !strings.Contains(stderr.String(), "intra-host bus") || !strings.Contains(stderr.String(), "node kwok-node-0 has 8 GPUs but no") {
		t.Errorf("probe does not say what it cannot know:\n%s", stderr.String())
	}
}
