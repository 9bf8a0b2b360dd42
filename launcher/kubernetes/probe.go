package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Node labels probe reads: NVIDIA GPU feature discovery's, and node feature
// discovery's RDMA ones where present.
const (
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUCount   = "nvidia.com/gpu.count"
	LabelGPUMemory  = "nvidia.com/gpu.memory" // MiB
	LabelRDMA       = "feature.node.kubernetes.io/rdma.available"
	labelHostname   = "kubernetes.io/hostname"
)

// Unknowable is what ProbeNodes cannot learn from the API: it needs a
// process on the nodes (the SSH probe or a measuring job).
var Unknowable = []string{
	"NIC types and rates (the cluster file says 1 Ethernet NIC at 25 Gbit/s unless a node's labels say RDMA; edit nics)",
	"the GPUs' intra-host bus (NVLink, NVSwitch or PCIe: pcie is assumed; edit intra_host)",
	"the links between islands and any shared RDMA fabric (edit links and fabric)",
	"NCCL, torch and Megatron-Core versions inside the image (software)",
}

// nodeInfo is what probe reads of a Node.
type nodeInfo struct {
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Status struct {
		Allocatable map[string]string `json:"allocatable"`
	} `json:"status"`
}

// ProbeNodes reads the nodes that have GPUs (allocatable gpuResource),
// optionally only those matching selector, and groups them into islands
// by GPU product, count and RDMA label: a cluster file whose hosts are node
// names, which Render's node-name affinity pins pods to. Notes say what
// was assumed.
func ProbeNodes(ctx context.Context, k Kubectl, selector, gpuResource string) (*cluster.File, []string, error) {
	if gpuResource == "" {
		gpuResource = "nvidia.com/gpu"
	}
	args := []string{"get", "nodes", "-o", "json"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	out, err := k.Run(ctx, nil, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("probe nodes: %w", err)
	}
	var list struct{ Items []nodeInfo }
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, nil, fmt.Errorf("probe nodes: read kubectl's output: %w", err)
	}
	return islandsFromNodes(list.Items, gpuResource)
}

func islandsFromNodes(nodes []nodeInfo, gpuResource string) (*cluster.File, []string, error) {
	type key struct {
		product string
		gpus    int
		rdma    bool
	}
	var notes []string
	byKey := map[key]*cluster.IslandSpec{}
	var order []key
	for _, n := range nodes {
		gpus, _ := strconv.Atoi(n.Status.Allocatable[gpuResource])
		if c, err := strconv.Atoi(n.Metadata.Labels[LabelGPUCount]); err == nil && c > gpus {
			gpus = c
		}
		if gpus <= 0 {
			continue
		}
		product := n.Metadata.Labels[LabelGPUProduct]
		if product == "" {
			notes = append(notes, fmt.Sprintf("node %s has %d GPUs but no %s label (GPU feature discovery): left out; add it to the cluster file with its GPU model", n.Metadata.Name, gpus, LabelGPUProduct))
			continue
		}
		k := key{product, gpus, n.Metadata.Labels[LabelRDMA] == "true"}
		isl, ok := byKey[k]
		if !ok {
			isl = newIsland(n, gpus, k.rdma, &notes)
			byKey[k] = isl
			order = append(order, k)
		}
		isl.Hosts = append(isl.Hosts, cluster.HostEntry{Name: n.Metadata.Name})
	}
	if len(order) == 0 {
		return nil, nil, fmt.Errorf("probe nodes: no node has allocatable %s and a %s label (is the NVIDIA device plugin and GPU feature discovery running? give --k8s-gpu-resource for another resource): %s", gpuResource, LabelGPUProduct, strings.Join(notes, "; "))
	}
	f := &cluster.File{}
	names := map[string]int{}
	for _, k := range order {
		isl := byKey[k]
		base := isl.Name
		if names[base]++; names[base] > 1 {
			isl.Name = fmt.Sprintf("%s-%d", base, names[base])
		}
		f.Clusters = append(f.Clusters, *isl)
	}
	if err := f.Validate(); err != nil {
		return nil, nil, fmt.Errorf("probe nodes: the cluster read from the nodes is not valid: %w", err)
	}
	return f, append(notes, Unknowable...), nil
}

// newIsland describes the island of node n from its labels and resources.
func newIsland(n nodeInfo, gpus int, rdma bool, notes *[]string) *cluster.IslandSpec {
	product := n.Metadata.Labels[LabelGPUProduct]
	model := strings.ReplaceAll(product, "-", " ")
	g := gpu.Spec{Model: model}
	if spec, ok := gpu.Lookup(model); ok {
		g.Model = spec.Model
	} else {
		*notes = append(*notes, fmt.Sprintf("node %s: GPU product %q is not in the catalog: give gpu.memory_gib and gpu.peak_bf16_tflops", n.Metadata.Name, product))
		if mib, err := strconv.ParseFloat(n.Metadata.Labels[LabelGPUMemory], 64); err == nil {
			g.MemoryGiB = mib / 1024
		}
	}
	name := strings.ToLower(strings.Trim(strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, cmpOr(product, "gpu")), "-"))
	nic := cluster.NICSpec{Type: cluster.NICEthernet, Count: 1, RateGbitPerS: 25}
	if rdma {
		nic = cluster.NICSpec{Type: cluster.NICInfiniBand, Count: 1, RateGbitPerS: 200}
		*notes = append(*notes, fmt.Sprintf("nodes like %s say RDMA (%s): assumed 1 InfiniBand NIC at 200 Gbit/s; whether it is InfiniBand or RoCE, how many and how fast needs the SSH probe", n.Metadata.Name, LabelRDMA))
	}
	isl := &cluster.IslandSpec{Name: name, GPUsPerHost: gpus, GPU: g, IntraHost: cluster.IntraHostBus{Type: "pcie"},
		NICs: []cluster.NICSpec{nic}}
	if mem, ok := parseQuantityGiB(n.Status.Allocatable["memory"]); ok {
		isl.HostMemoryGiB = mem
	}
	if cpu, err := strconv.Atoi(n.Status.Allocatable["cpu"]); err == nil {
		isl.CPUCores = cpu
	}
	return isl
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseQuantityGiB reads the memory quantities nodes report (Ki, Mi, Gi,
// Ti or plain bytes).
func parseQuantityGiB(q string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		gib    float64
	}{{"Ki", 1.0 / (1 << 20)}, {"Mi", 1.0 / (1 << 10)}, {"Gi", 1}, {"Ti", 1 << 10}} {
		if v, ok := strings.CutSuffix(q, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.gib, err == nil
		}
	}
	f, err := strconv.ParseFloat(q, 64)
	return f / (1 << 30), err == nil && !slices.Contains([]string{""}, q)
}
