package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// evictedPod is testdata/pod-evicted.json: a pod of TestK8sElasticOnKubelet
// (cmd/internal/run) as kubectl get pod -o json showed it right after its
// eviction through the Eviction API on the test-bed's kubelet (Kubernetes
// v1.34.4), unchanged; the other cases below change its fields to the
// other states.
func evictedPod(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("testdata/pod-evicted.json")
	if err != nil {
		t.Fatal(err)
	}
	var pod map[string]any
	if err := json.Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func field(pod map[string]any, key string) map[string]any { return pod[key].(map[string]any) }

// withDisruption sets (or, reason "", removes) the pod's DisruptionTarget.
func withDisruption(reason, message string) func(map[string]any) {
	return func(pod map[string]any) {
		st := field(pod, "status")
		var conds []any
		for _, c := range st["conditions"].([]any) {
			if c.(map[string]any)["type"] != "DisruptionTarget" {
				conds = append(conds, c)
			}
		}
		if reason != "" {
			conds = append(conds, map[string]any{"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
				"lastProbeTime": nil, "lastTransitionTime": "2026-11-29T09:18:09Z"})
		}
		st["conditions"] = conds
	}
}

func notDeleted(pod map[string]any) {
	delete(field(pod, "metadata"), "deletionTimestamp")
	delete(field(pod, "metadata"), "deletionGracePeriodSeconds")
}

// exited: the pod's container ended with code, the pod in phase.
func exited(phase string, code int) func(map[string]any) {
	return func(pod map[string]any) {
		st := field(pod, "status")
		st["phase"] = phase
		cs := st["containerStatuses"].([]any)[0].(map[string]any)
		cs["state"] = map[string]any{"terminated": map[string]any{"exitCode": code, "reason": "Error",
			"startedAt": "2026-11-29T09:16:47Z", "finishedAt": "2026-11-29T09:18:12Z", "containerID": cs["containerID"]}}
	}
}

// podJSON is a kubectl get pods -o json List of the evicted pod changed
// by each of changes (each a pod of its own), with the hostname given.
func podJSON(t *testing.T, pods ...[]func(map[string]any)) []byte {
	t.Helper()
	var items []any
	for i, changes := range pods {
		pod := evictedPod(t)
		field(pod, "spec")["hostname"] = "job-hosts-0-" + string(rune('0'+i))
		field(pod, "metadata")["name"] = "job-hosts-0-" + string(rune('0'+i)) + "-abcde"
		for _, c := range changes {
			c(pod)
		}
		items = append(items, pod)
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items, "metadata": map[string]any{"resourceVersion": ""}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLostPodRules: which pod states are a lost host (Kubernetes took the
// pod away) and which are not (its ranks ran, finished or failed by
// themselves: a rank failure, as the log's exit lines say).
func TestLostPodRules(t *testing.T) {
	node := func(pod map[string]any) { field(pod, "spec")["nodeName"] = "gpu-7" }
	for _, c := range []struct {
		name     string
		changes  []func(map[string]any)
		notReady map[string]string
		want     string // in the reason; "" not lost
	}{
		{"evicted through the Eviction API (as captured)", nil, nil, "DisruptionTarget EvictionByEvictionAPI: Eviction API: evicting"},
		{"running", []func(map[string]any){withDisruption("", ""), notDeleted}, nil, ""},
		{"taint manager (a NotReady node's NoExecute taint)", []func(map[string]any){withDisruption("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")}, nil, "DeletionByTaintManager"},
		{"preempted", []func(map[string]any){withDisruption("PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")}, nil, "PreemptionByScheduler"},
		{"evicted, already ended", []func(map[string]any){exited("Failed", 143)}, nil, "EvictionByEvictionAPI"},
		{"deleted (kubectl delete pod)", []func(map[string]any){withDisruption("", "")}, nil, "was deleted"},
		{"on a node not Ready", []func(map[string]any){withDisruption("", ""), notDeleted, node}, map[string]string{"gpu-7": "is not Ready (Ready=Unknown: NodeStatusUnknown Kubelet stopped posting node status.)"}, "its node gpu-7 is not Ready"},
		{"another node not Ready", []func(map[string]any){withDisruption("", ""), notDeleted, node}, map[string]string{"gpu-8": "is not Ready"}, ""},
		{"its rank exited 7", []func(map[string]any){withDisruption("", ""), notDeleted, exited("Failed", 7)}, nil, ""},
		{"finished", []func(map[string]any){withDisruption("", ""), notDeleted, exited("Succeeded", 0)}, nil, ""},
		{"DisruptionTarget False", []func(map[string]any){withDisruption("", ""), notDeleted, func(pod map[string]any) {
			st := field(pod, "status")
			st["conditions"] = append(st["conditions"].([]any), map[string]any{"type": "DisruptionTarget", "status": "False", "reason": "EvictionByEvictionAPI"})
		}}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			pods, err := readPods(podJSON(t, c.changes))
			if err != nil {
				t.Fatal(err)
			}
			got := pods["job-hosts-0-0"].lostWhy(c.notReady)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("lostWhy = %q, want %q", got, c.want)
			}
		})
	}
}

// TestLostAmongPods: the failure the supervisor reads from all the job's
// pods at once: the pod Kubernetes took away is a lost host named by its
// plan host, even as the Job controller deletes the others; once a pod
// failed by itself, the others' deletion is the Job's doing, not a loss.
func TestLostAmongPods(t *testing.T) {
	running := []func(map[string]any){withDisruption("", ""), notDeleted}
	deleting := []func(map[string]any){withDisruption("", "")}
	evicted := []func(map[string]any){}
	failed := []func(map[string]any){withDisruption("", ""), notDeleted, exited("Failed", 7)}
	for _, c := range []struct {
		name     string
		pods     [][]func(map[string]any)
		seen     []string // listed at an earlier poll
		wantHost string   // "" none lost
		want     string
		earlier  [][]func(map[string]any) // an earlier listing
	}{
		{"all running", [][]func(map[string]any){running, running, running}, nil, "", "", nil},
		{"one evicted, the Job deleting the others", [][]func(map[string]any){deleting, evicted, deleting}, nil, "cpu-1", "EvictionByEvictionAPI", nil},
		{"a rank failed, the Job deleting the others", [][]func(map[string]any){deleting, failed, deleting}, nil, "", "", nil},
		{"one deleted", [][]func(map[string]any){running, running, deleting}, nil, "cpu-2", "was deleted", nil},
		{"one gone", [][]func(map[string]any){running, running}, []string{"job-hosts-0-2"}, "cpu-2", "is gone", nil},
		{"not yet created", [][]func(map[string]any){running, running}, nil, "", "", nil},
		{"one gone after a rank failed", [][]func(map[string]any){failed, running}, []string{"job-hosts-0-2"}, "", "", nil},
		// Kubernetes removed the evicted pod before this listing, and
		// its peer's ranks failed as its went: the earlier listing's
		// DisruptionTarget still names it.
		{"one evicted, gone after its peer failed", [][]func(map[string]any){failed, running}, nil, "cpu-2", "EvictionByEvictionAPI",
			[][]func(map[string]any){running, running, evicted}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSupervisor(threePodJob(), "@@tag", Options{PlanHosts: true})
			for _, h := range c.seen {
				s.seen[h] = true
			}
			if c.earlier != nil {
				pods, err := readPods(podJSON(t, c.earlier...))
				if err != nil {
					t.Fatal(err)
				}
				s.remember(pods)
			}
			pods, err := readPods(podJSON(t, c.pods...))
			if err != nil {
				t.Fatal(err)
			}
			wantLost(t, s.lost(context.Background(), pods, false), c.wantHost, c.want)
		})
	}
}

// TestNodeFitness: a node's Ready condition and cordon, from kubectl get
// node -o json (one Node) and get nodes (a List).
func TestNodeFitness(t *testing.T) {
	nodeJSON := func(name, ready, reason, message string, cordoned bool) string {
		return `{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + name + `","labels":{"kubernetes.io/hostname":"` + name + `"}},` +
			`"spec":{"unschedulable":` + map[bool]string{true: "true", false: "false"}[cordoned] + `},` +
			`"status":{"conditions":[{"type":"MemoryPressure","status":"False","reason":"KubeletHasSufficientMemory","message":"kubelet has sufficient memory available"},` +
			`{"type":"Ready","status":"` + ready + `","reason":"` + reason + `","message":"` + message + `"}]}}`
	}
	ready := nodeJSON("gpu-1", "True", "KubeletReady", "kubelet is posting ready status", false)
	silent := nodeJSON("gpu-2", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.", false)
	cordoned := nodeJSON("gpu-3", "True", "KubeletReady", "kubelet is posting ready status", true)
	bad, err := readNodes([]byte(`{"apiVersion":"v1","kind":"List","items":[` + ready + "," + silent + "," + cordoned + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || !strings.Contains(bad["gpu-2"], "not Ready (Ready=Unknown: NodeStatusUnknown Kubelet stopped posting node status.)") {
		t.Errorf("not Ready: %v; want gpu-2 alone (a cordoned node's pods run on)", bad)
	}
	if bad, err := readNodes([]byte(silent)); err != nil || bad["gpu-2"] == "" {
		t.Errorf("one Node: %v %v", bad, err)
	}
	for _, c := range []struct {
		json, want string
	}{{ready, ""}, {silent, "is not Ready"}, {cordoned, "is cordoned"}} {
		var n nodeObject
		if err := json.Unmarshal([]byte(c.json), &n); err != nil {
			t.Fatal(err)
		}
		if got := n.unfit(); (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: unfit %q, want %q", n.Metadata.Name, got, c.want)
		}
	}
}

// TestRankFailureExplainedByLostPod: when Kubernetes takes a pod away, its
// peers' ranks fail as its ranks go, and their exit may be read first: a
// stop of the pod's ranks from outside (SIGTERM, as the host script
// reports it) within the settle time makes the failure that lost host,
// the peer's rank among those after it; without one the rank failure
// stands.
func TestRankFailureExplainedByLostPod(t *testing.T) {
	m := &k8s.Manifests{Name: "job"}
	for i, h := range []string{"cpu-0", "cpu-1", "cpu-2"} {
		m.Pods = append(m.Pods, k8s.Pod{NodeRank: i, Host: h, Name: "job-hosts-0-" + string(rune('0'+i)), Ranks: []int{i, i + 3}})
	}
	for _, c := range []struct {
		name     string
		then     []event
		wantHost string
		lost     bool
		evicted  bool // the watch showed cpu-1's pod with a DisruptionTarget
	}{
		{"a pod's ranks stopped from outside", []event{{pod: m.Pods[1], rank: 1, code: 143, byUs: true}}, "cpu-1", true, false},
		// The watch saw it evicted; no listing can be read now.
		{"stopped from outside, seen evicted", []event{{pod: m.Pods[1], rank: 1, code: 143, byUs: true}}, "cpu-1", true, true},
		{"nothing else", nil, "cpu-0", false, false},
		// A failing rank makes its host script stop the pod's others.
		{"its own pod's ranks stopped by its script", []event{{pod: m.Pods[0], rank: 3, code: 143, byUs: true}}, "cpu-0", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSupervisor(m, "@@tag", Options{PlanHosts: true, Kubectl: Kubectl{Path: "/nonexistent/kubectl"}})
			if c.evicted {
				pods, err := readPods(podJSON(t, nil, nil))
				if err != nil {
					t.Fatal(err)
				}
				s.keepDisrupted(pods["job-hosts-0-1"])
			}
			for _, ev := range c.then {
				s.events <- ev
			}
			got := s.explain(context.Background(), event{pod: m.Pods[0], rank: 0, code: 1})
			if got.Host != c.wantHost || got.HostLost() != c.lost {
				t.Fatalf("%s (lost %v): %s; want %s, lost %v", got.Host, got.HostLost(), got.Reason, c.wantHost, c.lost)
			}
			want := "terminated from outside"
			if c.evicted {
				want = "DisruptionTarget EvictionByEvictionAPI"
			}
			if c.lost && (len(got.FailedAfter) != 1 || got.FailedAfter[0] != 0 || !strings.Contains(got.Reason, want)) {
				t.Errorf("reason %q, failed after %v: want %q and rank 0 after it", got.Reason, got.FailedAfter, want)
			}
		})
	}
}

// TestStopAfterEveryRankSucceeded: a stop that comes after every rank
// exited 0 by itself (a --progress-timeout after the last step, while a
// busy control plane has yet to mark the pods Succeeded) is no failure;
// with a rank not yet exited, or stopped by its script, it is one.
func TestStopAfterEveryRankSucceeded(t *testing.T) {
	m := &k8s.Manifests{Name: "job"}
	for i, h := range []string{"cpu-0", "cpu-1"} {
		m.Pods = append(m.Pods, k8s.Pod{NodeRank: i, Host: h, Name: "job-hosts-0-" + string(rune('0'+i)), Ranks: []int{2 * i, 2*i + 1}})
	}
	for _, c := range []struct {
		name  string
		exits []event
		ok    bool
	}{
		{"every rank exited 0", []event{{pod: m.Pods[0], rank: 0}, {pod: m.Pods[0], rank: 1}, {pod: m.Pods[1], rank: 2}, {pod: m.Pods[1], rank: 3}}, true},
		{"a rank still running", []event{{pod: m.Pods[0], rank: 0}, {pod: m.Pods[0], rank: 1}, {pod: m.Pods[1], rank: 2}}, false},
		{"a rank stopped by its script", []event{{pod: m.Pods[0], rank: 0}, {pod: m.Pods[0], rank: 1}, {pod: m.Pods[1], rank: 2}, {pod: m.Pods[1], rank: 3, code: 143, byUs: true}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Out is set: the select in run may take a queued exit before
			// the cancelled context, and a rank stopped by its script is
			// then reported as it happens.
			s := newSupervisor(m, "@@tag", Options{PlanHosts: true, Poll: time.Hour, Out: io.Discard, Kubectl: Kubectl{Path: "/nonexistent/kubectl"}})
			for _, ev := range c.exits {
				s.events <- ev
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(errors.New("no new step for 8s"))
			f := s.run(ctx)
			switch {
			case c.ok && f != nil:
				t.Errorf("%s: want success, every rank having exited 0", f.Reason)
			case !c.ok && f == nil:
				t.Errorf("success, want a failure: not every rank exited 0")
			}
		})
	}
}

// wantLost checks lost's answer: no lost host when host is "", else host
// lost, its reason containing reason.
func wantLost(t *testing.T, f *launch.JobFailure, host, reason string) {
	t.Helper()
	switch {
	case host == "" && f != nil:
		t.Errorf("lost %s: %s; want none", f.Host, f.Reason)
	case host != "" && f == nil:
		t.Errorf("none lost, want %s", host)
	case f != nil && (f.Host != host || !f.HostLost() || !strings.Contains(f.Reason, reason)):
		t.Errorf("lost %s (host lost %v): %s; want %s, %q", f.Host, f.HostLost(), f.Reason, host, reason)
	}
}

// threePodJob is job "job" on cpu-0..2, a pod job-hosts-0-N of rank N on
// each.
func threePodJob() *k8s.Manifests {
	m := &k8s.Manifests{Name: "job"}
	for i, h := range []string{"cpu-0", "cpu-1", "cpu-2"} {
		m.Pods = append(m.Pods, k8s.Pod{NodeRank: i, Host: h, Name: "job-hosts-0-" + string(rune('0'+i)), Ranks: []int{i}})
	}
	return m
}

// TestWatchKeepsDisruptions: kubectl get pods --watch -o json prints one
// pod object per change (some versions the first listing as a List). A
// pod the watch showed evicted is named with its DisruptionTarget after
// Kubernetes removed it, even though no poll ever listed it so (CI at
// c7f1db7: the polls a second apart missed the evicted pod's short life).
func TestWatchKeepsDisruptions(t *testing.T) {
	running := []func(map[string]any){withDisruption("", ""), notDeleted}
	failed := []func(map[string]any){withDisruption("", ""), notDeleted, exited("Failed", 7)}
	// objects are a listing's items, each printed alone as the watch does.
	objects := func(pods ...[]func(map[string]any)) string {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(podJSON(t, pods...), &list); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, it := range list.Items {
			b.Write(it)
			b.WriteString("\n")
		}
		return b.String()
	}
	for _, c := range []struct {
		name, stream string
		wantHost     string
	}{
		{"objects", objects(running, running, running) + objects(running, running, nil), "cpu-2"},
		{"a List first", string(podJSON(t, running, running, running)) + objects(running, running, nil), "cpu-2"},
		// The evicted pod's script stops its ranks cleanly on the SIGTERM,
		// so its last change is Succeeded, still with its DisruptionTarget
		// (seen on the kubelet stack): that look must not hide why it went.
		{"evicted, then Succeeded", objects(running, running, running) + objects(running, running, nil) +
			objects(running, running, []func(map[string]any){exited("Succeeded", 0)}), "cpu-2"},
		{"never evicted", objects(running, running, running), ""},
		{"cut off", objects(running, running, running) + `{"kind": "Pod", "metadata": {`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newSupervisor(threePodJob(), "@@tag", Options{PlanHosts: true})
			s.readWatch(strings.NewReader(c.stream))
			pods, err := readPods(podJSON(t, failed, running)) // the evicted pod is gone, its peer failed
			if err != nil {
				t.Fatal(err)
			}
			wantLost(t, s.lost(context.Background(), pods, false), c.wantHost, "DisruptionTarget EvictionByEvictionAPI")
			// The evicted pod still listed, Succeeded: the same answer.
			pods, err = readPods(podJSON(t, failed, running, []func(map[string]any){exited("Succeeded", 0)}))
			if err != nil {
				t.Fatal(err)
			}
			wantLost(t, s.lost(context.Background(), pods, false), c.wantHost, "DisruptionTarget EvictionByEvictionAPI")
		})
	}
}
