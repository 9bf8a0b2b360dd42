package k8s

import (
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// IslandsOf groups a cluster's hosts by island, as Render takes them: the
// hosts' names are their Kubernetes node names, the GPU product label value
// is the catalog model as NVIDIA's GPU feature discovery writes it (spaces
// become '-'), and each pod requests all of its host's GPUs (the plan
// places a rank on each of them by index).
func IslandsOf(c *cluster.Cluster) []Island {
	out := make([]Island, len(c.Islands))
	for i, isl := range c.Islands {
		out[i] = Island{Name: isl.Spec.Name, GPUs: isl.Spec.GPUsPerHost,
			GPUProduct: strings.ReplaceAll(strings.TrimSpace(isl.Spec.GPU.Model), " ", "-")}
		for _, h := range isl.Hosts {
			out[i].Hosts = append(out[i].Hosts, c.Hosts[h].Name)
		}
	}
	return out
}
