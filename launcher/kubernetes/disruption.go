package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// The pods and nodes as kubectl get ... -o json prints them: the fields
// the supervisor reads.
type (
	podList struct {
		Items []podObject `json:"items"`
	}
	podObject struct {
		Metadata struct {
			Name              string  `json:"name"`
			DeletionTimestamp *string `json:"deletionTimestamp"`
		} `json:"metadata"`
		Spec struct {
			Hostname string `json:"hostname"`
			NodeName string `json:"nodeName"`
		} `json:"spec"`
		Status struct {
			Phase      string         `json:"phase"`
			Conditions []podCondition `json:"conditions"`
			// ContainerStatuses: the container's state.
			ContainerStatuses []struct {
				State struct {
					Running    *struct{} `json:"running"`
					Terminated *struct {
						ExitCode int `json:"exitCode"`
					} `json:"terminated"`
					Waiting *struct {
						Reason  string `json:"reason"`
						Message string `json:"message"`
					} `json:"waiting"`
				} `json:"state"`
			} `json:"containerStatuses"`
		} `json:"status"`
	}
	podCondition struct {
		Type    string `json:"type"`
		Status  string `json:"status"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	nodeObject struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Unschedulable bool `json:"unschedulable"`
		} `json:"spec"`
		Status struct {
			Conditions []podCondition `json:"conditions"`
		} `json:"status"`
	}
)

// podStateOf is what the supervisor keeps of a pod.
func podStateOf(it podObject) podState {
	st := podState{name: it.Metadata.Name, hostname: it.Spec.Hostname, node: it.Spec.NodeName, phase: it.Status.Phase,
		exitCode: -1, deleting: it.Metadata.DeletionTimestamp != nil}
	for _, c := range it.Status.ContainerStatuses {
		switch {
		case c.State.Running != nil:
			st.started = true
		case c.State.Terminated != nil:
			st.started = true
			st.exitCode = c.State.Terminated.ExitCode
		case c.State.Waiting != nil:
			st.waiting, st.message = c.State.Waiting.Reason, c.State.Waiting.Message
		}
	}
	for _, c := range it.Status.Conditions {
		// DisruptionTarget (Kubernetes 1.26+): the pod is about to be
		// terminated for a disruption, not by its own containers: the
		// Eviction API (a node drain), the taint manager (a NoExecute
		// taint, such as a node that went NotReady or unreachable), the
		// scheduler's preemption, the pod GC (its node is gone) or the
		// kubelet (node pressure, a node shutting down).
		if c.Type == "DisruptionTarget" && c.Status == "True" {
			st.disruption = strings.TrimSuffix(c.Reason+": "+c.Message, ": ")
		}
	}
	return st
}

// readPods reads kubectl get pods -o json, by pod hostname.
func readPods(out []byte) (map[string]podState, error) {
	var list podList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("read pods: %w", err)
	}
	pods := map[string]podState{}
	for _, it := range list.Items {
		st := podStateOf(it)
		if old, dup := pods[st.hostname]; dup && old.lostWhy(nil) != "" {
			continue // the lost one says more than any that replaced it
		}
		pods[st.hostname] = st
	}
	return pods, nil
}

// lostWhy says why a pod counts as a lost host rather than failed by its
// ranks ("" when it does not): Kubernetes itself is taking it away
// (DisruptionTarget), it is being deleted (never by pipette-launch while
// it supervises), or its node is not Ready (notReady: the node's reason,
// nil when not known). A pod that finished is never lost.
func (st podState) lostWhy(notReady map[string]string) string {
	if st.phase == "Succeeded" {
		return ""
	}
	switch {
	case st.disruption != "":
		return fmt.Sprintf("pod %s was terminated by Kubernetes (DisruptionTarget %s)", st.name, st.disruption)
	case notReady[st.node] != "":
		return fmt.Sprintf("pod %s: its node %s %s", st.name, st.node, notReady[st.node])
	case st.deleting:
		return fmt.Sprintf("pod %s was deleted", st.name)
	}
	return ""
}

// lostRank orders the reasons a pod is lost, the clearest first: when
// several pods go at once (the Job deletes the others once one failed),
// the one Kubernetes took away is the cause.
func (st podState) lostRank(notReady map[string]string) int {
	switch {
	case st.lostWhy(notReady) == "":
		return 0
	case st.disruption != "":
		return 4
	case notReady[st.node] != "":
		return 3
	case st.deleting:
		return 1
	}
	return 0
}

// readNodes reads kubectl get node NAME... -o json (one Node, or a List
// for several) into the nodes that are not fit to run a job, with why.
func readNodes(out []byte) (map[string]string, error) {
	var list struct {
		Kind  string       `json:"kind"`
		Items []nodeObject `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	if list.Kind == "Node" {
		var n nodeObject
		if err := json.Unmarshal(out, &n); err != nil {
			return nil, fmt.Errorf("read node: %w", err)
		}
		list.Items = []nodeObject{n}
	}
	bad := map[string]string{}
	for _, n := range list.Items {
		if why := n.notReady(); why != "" {
			bad[n.Metadata.Name] = why
		}
	}
	return bad, nil
}

// notReady says why a node cannot hold a job's pod ("" when it can): its
// Ready condition is not True (the kubelet stopped reporting, or reports
// a problem).
func (n nodeObject) notReady() string {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			if c.Status == "True" {
				return ""
			}
			return fmt.Sprintf("is not Ready (Ready=%s: %s)", c.Status, strings.TrimSpace(c.Reason+" "+c.Message))
		}
	}
	return "is not Ready (no Ready condition)"
}

// unfit says why a node takes no new pod of a job ("" when it does): not
// Ready, or cordoned (spec.unschedulable, kubectl cordon or drain).
func (n nodeObject) unfit() string {
	if why := n.notReady(); why != "" {
		return why
	}
	if n.Spec.Unschedulable {
		return "is cordoned (unschedulable)"
	}
	return ""
}

// nodeEvery: the nodes of the job's pods are looked at every nodeEvery
// polls (and when a rank fails): the node controller marks a silent node
// NotReady only after its grace period (40 s and more), so a finer look
// would find nothing sooner.
const nodeEvery = 5

// settle is how long a rank's failure waits for a lost pod to explain it:
// when Kubernetes takes a pod away, its peers' ranks fail as its ranks go,
// and their exits may come before its own.
const settle = 2 * time.Second

// explain is the job's failure from first, the first exit the log
// streams reported that is one (a rank failing, or ranks stopped by their
// host script), and what comes within settle after it. Ranks a host script
// stopped (SIGTERM) while we supervise, in a pod none of whose ranks
// failed by itself first (a failing rank makes its script stop the
// others), were stopped from outside: Kubernetes terminated the pod, a
// lost host, with the failing ranks after it. Else the first rank
// failure; either way a fresh look at the pods may find a pod taken away
// that explains it (the DisruptionTarget says more).
func (s *supervisor) explain(ctx context.Context, first event) *launch.JobFailure {
	// A look at the pods now, before settling: an evicted pod is removed
	// soon after its containers stop, and its DisruptionTarget with it.
	if pods, err := s.pods(ctx); err == nil {
		s.remember(pods)
	}
	evs := []event{first}
	wait := time.NewTimer(settle)
	defer wait.Stop()
settling:
	for {
		select {
		case ev := <-s.events:
			s.failure(ev) // its exit recorded
			evs = append(evs, ev)
		case <-wait.C:
			break settling
		case <-ctx.Done():
			break settling
		}
	}
	own := map[string]bool{}
	var f, outside *launch.JobFailure
	var after []int
	outsidePod := ""
	for _, ev := range evs {
		switch {
		case !ev.byUs && ev.code != 0:
			own[ev.pod.Name] = true
			if f == nil {
				f = s.failure(ev)
			} else {
				after = append(after, ev.rank)
			}
		case ev.byUs && !own[ev.pod.Name] && outside == nil:
			outsidePod = ev.pod.Name
			outside = launch.NewHostLost(s.m.Name, s.hostOf(ev.pod), fmt.Sprintf("pod %s was terminated from outside pipette-launch (its ranks stopped by SIGTERM: evicted, deleted or preempted)", ev.pod.Name), time.Now())
		}
	}
	if own[outsidePod] { // its own failure was read after its script's stops
		outside = nil
	}
	switch {
	case outside != nil:
		if gone, ok := s.disruptedPod(outsidePod); ok {
			// A listing or the watch saw Kubernetes take it away: that is
			// why its ranks were stopped, whatever the pods show by now
			// (CI at 6a117e3: the listing after settling no longer did).
			if why := gone.lostWhy(nil); why != "" {
				outside.Reason = why
			}
		}
		if f != nil {
			after = append([]int{f.Rank}, after...)
		}
		f = outside
	case f == nil:
		return launch.NewInterrupted(s.m.Name, "every rank was stopped by its host script", time.Now())
	}
	f.FailedAfter = append(f.FailedAfter, after...)
	pods, err := s.podsRetried(ctx)
	if err != nil {
		return f
	}
	lost := s.lost(ctx, pods, true)
	switch {
	case lost == nil:
		return f
	case !f.HostLost():
		lost.FailedAfter = append(append(lost.FailedAfter, f.Rank), f.FailedAfter...)
		return lost
	case lost.Host == f.Host:
		f.Reason = lost.Reason // the DisruptionTarget's reason, when it still shows
	}
	return f
}

// lost is the failure of the job's pod that Kubernetes took away (a lost
// host, launch.NewHostLost, naming the pod or its plan host), nil when
// none was. pods are the poller's listing; withNodes: look at their
// nodes first. A pod deleted or gone counts only while no pod of the job
// failed by itself: once one did, the Job controller deletes the others.
func (s *supervisor) lost(ctx context.Context, pods map[string]podState, withNodes bool) *launch.JobFailure {
	s.remember(pods)
	if withNodes {
		s.notReady = s.lookAtNodes(ctx, pods)
	}
	ownFailure := false
	for _, st := range pods {
		if st.phase == "Failed" && st.lostRank(s.notReady) == 0 {
			ownFailure = true
		}
	}
	var lostPod k8s.Pod
	best, why := 0, ""
	for _, p := range s.m.Pods {
		st, listed := pods[p.Name]
		gone, wasDisrupted := s.disruptedPod(p.Name)
		rank, w := 0, ""
		switch {
		case listed:
			rank, w = st.lostRank(s.notReady), st.lostWhy(s.notReady)
			if rank == 0 && wasDisrupted {
				// Listed as Succeeded now, its ranks stopped cleanly on
				// the SIGTERM; an earlier look saw it taken away.
				rank, w = gone.lostRank(nil), gone.lostWhy(nil)
			}
		case wasDisrupted:
			// Gone since a listing or the watch showed Kubernetes
			// taking it away.
			rank, w = gone.lostRank(nil), gone.lostWhy(nil)
		case s.seen[p.Name]:
			rank, w = 2, fmt.Sprintf("pod %s is gone (deleted)", p.Name)
		}
		if rank < 3 && ownFailure {
			continue
		}
		if rank > best {
			lostPod, best, why = p, rank, w
		}
	}
	if best == 0 {
		return nil
	}
	if !s.o.PlanHosts {
		why += " (plan host " + lostPod.Host + ")"
	}
	return launch.NewHostLost(s.m.Name, s.hostOf(lostPod), why, time.Now())
}

// remember records the pods a listing showed (seen), and those it showed
// with a DisruptionTarget (disrupted), for when they are gone.
func (s *supervisor) remember(pods map[string]podState) {
	for h, st := range pods {
		s.seen[h] = true
		if st.disruption != "" {
			s.keepDisrupted(st)
		}
	}
}

// keepDisrupted records a pod seen with a DisruptionTarget, by hostname
// (from the poller or the watch). A pod taken away ends Succeeded when its
// script stops its ranks cleanly on the SIGTERM (seen on the kubelet stack:
// the watch's last change of the evicted pod), and a Succeeded pod is not
// lost (lostWhy), so that last look must not replace the one before it
// that says why the pod went.
func (s *supervisor) keepDisrupted(st podState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.disrupted[st.hostname]; ok && st.phase == "Succeeded" && old.phase != "Succeeded" {
		return
	}
	s.disrupted[st.hostname] = st
}

// disruptedPod is the pod named hostname as last seen with a
// DisruptionTarget, if it was.
func (s *supervisor) disruptedPod(hostname string) (podState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.disrupted[hostname]
	return st, ok
}

// watchDisruptions follows the job's pods with a watch (kubectl get pods
// --watch) until ctx ends, keeping each pod it shows with a
// DisruptionTarget. An evicted pod carries that condition only from the
// eviction until Kubernetes removes it, which under load can be within a
// second of its containers stopping: polls a second apart, each a kubectl
// run, missed it (CI at c7f1db7: the loss was blamed without
// "EvictionByEvictionAPI"). A watch sees every change. Without one (an
// old kubectl, an API error) the polls still look.
func (s *supervisor) watchDisruptions(ctx context.Context) {
	cmd := exec.CommandContext(ctx, s.o.Kubectl.path(), s.o.Kubectl.args(s.getPods("--watch"))...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return
	}
	s.readWatch(out)
	_ = cmd.Wait()
}

// readWatch reads kubectl's watch output: one JSON object per pod change
// (a List, as some kubectl versions print the first listing, counts as
// its items).
func (s *supervisor) readWatch(r io.Reader) {
	dec := json.NewDecoder(r)
	for {
		var doc struct {
			podObject
			Kind  string      `json:"kind"`
			Items []podObject `json:"items"`
		}
		if err := dec.Decode(&doc); err != nil {
			return
		}
		items := doc.Items
		if doc.Kind != "List" {
			items = []podObject{doc.podObject}
		}
		for _, it := range items {
			if st := podStateOf(it); st.disruption != "" {
				s.keepDisrupted(st)
			}
		}
	}
}

// lookAtNodes are the nodes of pods that are not Ready, with why; nil
// when they cannot be read (the next look tries again).
func (s *supervisor) lookAtNodes(ctx context.Context, pods map[string]podState) map[string]string {
	var names []string
	for _, st := range pods {
		if st.node != "" && !slices.Contains(names, st.node) {
			names = append(names, st.node)
		}
	}
	if len(names) == 0 {
		return nil
	}
	out, err := s.o.Kubectl.Run(ctx, nil, append([]string{"get", "nodes", "-o", "json"}, names...)...)
	if err != nil {
		return s.notReady
	}
	bad, err := readNodes(out)
	if err != nil {
		return s.notReady
	}
	return bad
}
