package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/testbed/kube"
)

// exampleNodes are the hosts of examples/two-clusters.yaml as kwok nodes
// with 8 GPUs each and the product label GPU feature discovery would set.
func exampleNodes(islands []Island) []byte {
	var b bytes.Buffer
	for _, isl := range islands {
		for _, h := range isl.Hosts {
			fmt.Fprintf(&b, `---
apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations: {node.alpha.kubernetes.io/ttl: "0", kwok.x-k8s.io/node: fake}
  labels: {kubernetes.io/hostname: %s, type: kwok, nvidia.com/gpu.product: %s}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "%d"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110", nvidia.com/gpu: "%d"}
`, h, h, isl.GPUProduct, isl.GPUs, isl.GPUs)
		}
	}
	return b.Bytes()
}

// TestStackValidatesAndRunsJobSet: on a real control plane (kwok nodes),
// every golden manifest passes server-side validation (CRD schemas, the
// JobSet and Trainer webhooks), and the two-island JobSet's pods are
// created by the JobSet controller where the plan puts them.
func TestStackValidatesAndRunsJobSet(t *testing.T) {
	s := kube.New(t, kube.Kwok)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(stdin []byte, args ...string) []byte {
		t.Helper()
		out, err := s.Kubectl(ctx, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	j, islands := exampleJob(t, nil, []job.EnvVar{{Name: "HF_TOKEN", Value: "hf-secret"}})
	kubectl(exampleNodes(islands), "apply", "-f", "-")
	kubectl(nil, "wait", "--for=condition=Ready", "node", "-l", "type=kwok", "--timeout=60s")
	kubectl(nil, "create", "namespace", "ml")
	kubectl(nil, "apply", "--server-side", "-f", "testdata/stack/clustertrainingruntime.yaml")

	goldens, _ := filepath.Glob("testdata/*.yaml")
	if len(goldens) < 3 {
		t.Fatalf("golden manifests: %v", goldens)
	}
	for _, g := range goldens {
		out, err := s.Kubectl(ctx, nil, "apply", "--server-side", "--dry-run=server", "-f", g)
		if err != nil {
			t.Errorf("server-side validation of %s: %v", g, err)
			continue
		}
		t.Logf("%s: %s", filepath.Base(g), strings.Join(strings.Fields(string(out)), " "))
	}

	m, err := Render(j, islands, Options{Image: "registry.example/train/megatron:24.09"})
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	secret, err := ObjectYAML(m.Secret)
	if err != nil {
		t.Fatal(err)
	}
	kubectl(secret, "apply", "--server-side", "-f", "-")
	kubectl(manifests, "apply", "--server-side", "-f", "-")
	pods := waitPods(t, s, ctx, "llama-two-islands", len(m.Pods))
	for _, want := range m.Pods {
		i := slices.IndexFunc(pods, func(p podInfo) bool { return p.Spec.Hostname == want.Name })
		if i < 0 {
			t.Errorf("no pod with hostname %s", want.Name)
			continue
		}
		p := pods[i]
		isl := islands[slices.IndexFunc(islands, func(isl Island) bool { return RJobName(isl.Name) == want.RJob })]
		if !slices.Contains(isl.Hosts, p.Spec.NodeName) {
			t.Errorf("pod %s (node rank %d) runs on %s, not a node of island %s %v", want.Name, want.NodeRank, p.Spec.NodeName, isl.Name, isl.Hosts)
		}
		if p.Spec.Subdomain != "llama-two-islands" {
			t.Errorf("pod %s subdomain %q: its DNS name would not be %s", want.Name, p.Spec.Subdomain, m.MasterAddr)
		}
		if idx := p.Metadata.Annotations["batch.kubernetes.io/job-completion-index"]; idx != strconv.Itoa(want.Index) {
			t.Errorf("pod %s completion index %s, want %d", want.Name, idx, want.Index)
		}
		c := p.Spec.Containers[0]
		if c.Resources.Limits["nvidia.com/gpu"] != "8" {
			t.Errorf("pod %s GPUs %v, want 8", want.Name, c.Resources.Limits)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["PIPETTE_RJOB"] != want.RJob {
			t.Errorf("pod %s PIPETTE_RJOB=%q, want %s", want.Name, env["PIPETTE_RJOB"], want.RJob)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef.Name != SecretName("llama-two-islands") {
			t.Errorf("pod %s envFrom %+v, want the Secret", want.Name, c.EnvFrom)
		}
	}
	// The ConfigMap read back maps each replicated job and index to the
	// plan's node rank, whose script names rank 0's pod as MASTER_ADDR.
	var cm struct{ Data map[string]string }
	if err := json.Unmarshal(kubectl(nil, "get", "configmap", "llama-two-islands-scripts", "-o", "json"), &cm); err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Pods {
		if !strings.Contains(cm.Data["entrypoint.sh"], fmt.Sprintf("%s/%d) r=%d ;;", p.RJob, p.Index, p.NodeRank)) {
			t.Errorf("stored entrypoint does not map %s/%d to node rank %d", p.RJob, p.Index, p.NodeRank)
		}
		if !strings.Contains(cm.Data[fmt.Sprintf("host-%d.sh", p.NodeRank)], "'export MASTER_ADDR="+m.MasterAddr+"'") {
			t.Errorf("stored script of node rank %d lacks MASTER_ADDR=%s", p.NodeRank, m.MasterAddr)
		}
	}
	// kwok completes the pods: the JobSet completes.
	kubectl(nil, "wait", "--for=condition=Completed", "jobset/llama-two-islands", "--timeout=120s")

	// A TrainJob of the H100 island: Trainer's JobSet names its pods as
	// MASTER_ADDR says, and they land on that island's nodes.
	one := *j
	one.Hosts = j.Hosts[:2]
	tm, err := Render(&one, islands[:1], Options{Name: "llama-tj", Image: "registry.example/train/megatron:24.09", Format: FormatTrainJob})
	if err != nil {
		t.Fatal(err)
	}
	ty, err := tm.YAML()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(ty, "apply", "--server-side", "-f", "-")
	tpods := waitPods(t, s, ctx, "llama-tj", 2)
	for _, want := range tm.Pods {
		i := slices.IndexFunc(tpods, func(p podInfo) bool { return p.Spec.Hostname == want.Name })
		if i < 0 {
			t.Errorf("TrainJob: no pod with hostname %s (MASTER_ADDR %s)", want.Name, tm.MasterAddr)
			continue
		}
		if p := tpods[i]; p.Spec.Subdomain != "llama-tj" || !slices.Contains(islands[0].Hosts, p.Spec.NodeName) {
			t.Errorf("TrainJob pod %s: subdomain %q, node %s", want.Name, p.Spec.Subdomain, p.Spec.NodeName)
		}
	}
}

type podInfo struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Hostname   string `json:"hostname"`
		Subdomain  string `json:"subdomain"`
		NodeName   string `json:"nodeName"`
		Containers []struct {
			Env []struct {
				Name  string `json:"name"`
				Value string `json:"value"`
			} `json:"env"`
			EnvFrom []struct {
				SecretRef struct {
					Name string `json:"name"`
				} `json:"secretRef"`
			} `json:"envFrom"`
			Resources struct {
				Limits map[string]string `json:"limits"`
			} `json:"resources"`
		} `json:"containers"`
	} `json:"spec"`
}

// waitPods waits until the JobSet's n pods are scheduled.
func waitPods(t *testing.T, s *kube.Stack, ctx context.Context, jobset string, n int) []podInfo {
	t.Helper()
	var last []byte
	for ctx.Err() == nil {
		out, err := s.Kubectl(ctx, nil, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name="+jobset, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		last = out
		var list struct{ Items []podInfo }
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatal(err)
		}
		scheduled := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				scheduled++
			}
		}
		if scheduled == n && len(list.Items) == n {
			return list.Items
		}
		time.Sleep(200 * time.Millisecond)
	}
	events, _ := s.Kubectl(context.Background(), nil, "get", "events", "-A")
	t.Fatalf("JobSet %s: %d pods not scheduled in time; pods:\n%s\nevents:\n%s", jobset, n, last, events)
	return nil
}
