package run

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/pipette-launch/pipette-launch/launcher/kubernetes"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// LabelRun is on every object of every attempt of an elastic job on
// Kubernetes: each attempt's JobSet has a name (and LabelJob) of its own.
const LabelRun = "pipette-launch/run"

// k8sAttempts runs an elastic job's attempts (runElastic) as JobSets:
// each attempt's job rendered under a name of its own (attemptName: the
// deletion of the one before cannot race it, and launcher/kubernetes
// waits until every object of that one is gone), applied and supervised
// by launcher/kubernetes, whose failures name the plan's hosts: a pod
// Kubernetes took away is a lost host, a rank exiting non-zero a rank
// failure. Hosts are node names (affinity node-names) or pod slots (the
// other affinities), checked through the API rather than probed.
type k8sAttempts struct {
	ko      k8s.Options // the resolved options; Name is the job's base name
	kubectl kubernetes.Kubectl
	grace   int
	errOut  io.Writer
}

// attemptName is the JobSet name of attempt (0 the first) of the job
// named base.
func attemptName(base string, attempt int) string {
	return fmt.Sprintf("%s-a%d", base, attempt+1)
}

// nodeNames: hosts are node names, each checked; else pod slots.
func (a *k8sAttempts) nodeNames() bool {
	return a.ko.Affinity == "" || a.ko.Affinity == k8s.AffinityNodeNames
}

// check is a host's health check: its node exists, is Ready and is not
// cordoned; a pod slot's, that the cluster has such a node.
func (a *k8sAttempts) check(ctx context.Context, host string) error {
	if a.nodeNames() {
		return kubernetes.CheckNode(ctx, a.kubectl, host)
	}
	return kubernetes.CheckReadyNode(ctx, a.kubectl)
}

// checkHosts is the check of an attempt's hosts before it starts: those
// that fail it are named in a *remote.HostErrors (the loop leaves them
// out).
func (a *k8sAttempts) checkHosts(ctx context.Context, hosts []string) error {
	var failed remote.HostErrors
	var slots error
	if !a.nodeNames() {
		slots = a.check(ctx, "") // one answer for every slot
	}
	for _, h := range hosts {
		err := slots
		if a.nodeNames() {
			err = a.check(ctx, h)
		}
		if err != nil {
			failed.Add(h, err)
		}
	}
	return failed.ErrorOrNil()
}

// launch renders attempt's job j (planned on cluster c) as a JobSet of
// its own and runs it; restart is TORCHELASTIC_RESTART_COUNT.
func (a *k8sAttempts) launch(ctx context.Context, j *job.Job, c *plannedCluster, restart, attempt int, out io.Writer) error {
	ko := a.ko
	ko.Name = attemptName(a.ko.Name, attempt)
	ko.Labels = maps.Clone(ko.Labels)
	if ko.Labels == nil {
		ko.Labels = map[string]string{}
	}
	ko.Labels[LabelRun] = a.ko.Name
	tag := kubernetes.Nonce()
	ko.Control = &job.Control{Tag: tag, Grace: a.grace, Restart: restart}
	m, err := k8s.Render(j, k8s.IslandsOf(c), ko)
	if err != nil {
		return fmt.Errorf("--launcher k8s: attempt %d: %w", attempt+1, err)
	}
	for _, w := range m.Warnings[len(j.Warnings):] { // the job's own: said as it was prepared
		fmt.Fprintf(a.errOut, "pipette-launch: warning: %s\n", w)
	}
	return kubernetes.Launch(ctx, m, tag, kubernetes.Options{Kubectl: a.kubectl, Out: out, PlanHosts: true})
}
