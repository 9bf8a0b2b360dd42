// Package kubernetes runs rendered manifests (templates/k8s) on a cluster
// with kubectl and supervises them like the SSH path: every pod's output
// with host:rank: prefixes, the first failing rank (or SIGINT/SIGTERM)
// stops the whole job, and the same root-cause summary names the pod, the
// rank, its exit code and its last lines. Stopping deletes the JobSet (its
// Jobs and pods go with it), the Service, ConfigMap and Secret, and waits
// until no pod, Job or object of the job is left. A pod that Kubernetes
// itself takes away (evicted, drained, preempted, its node NotReady:
// disruption.go) is a lost host (launch.JobFailure.HostLost), not a rank
// failure: the elastic loop restarts without it. nodes.go holds a host's
// health check through the API.
//
// kubectl rather than client-go: server-side apply, dry runs, log
// streaming and deletion are each one kubectl command, the user's
// kubeconfig, contexts and auth plugins work as they do for everything
// else they run, and the project does not take on client-go's ~60 modules
// for a handful of calls. The test-bed builds kubectl of the cluster's own
// version.
package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/lines"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
)

// Kubectl runs kubectl with the user's kubeconfig and context.
type Kubectl struct {
	Path       string // default "kubectl"
	Kubeconfig string
	Context    string
}

// Run runs kubectl with stdin, returning stdout; the error carries stderr.
func (k Kubectl) Run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.path(), k.args(args)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("kubectl not found (%s): install kubectl or give --kubectl", k.path())
		}
		return out.Bytes(), fmt.Errorf("kubectl %s: %w: %s", args[0], err, msg)
	}
	return out.Bytes(), nil
}

func (k Kubectl) path() string {
	if k.Path == "" {
		return "kubectl"
	}
	return k.Path
}

func (k Kubectl) args(args []string) []string {
	var out []string
	if k.Kubeconfig != "" {
		out = append(out, "--kubeconfig", k.Kubeconfig)
	}
	if k.Context != "" {
		out = append(out, "--context", k.Context)
	}
	return append(out, args...)
}

// Options are how Run talks to the cluster and the user.
type Options struct {
	Kubectl Kubectl
	Out     io.Writer // host:rank: lines and notes
	// Poll is how often pods are listed (default 1 s); StopTimeout bounds
	// the wait for the pods to be gone after the delete (default: the
	// pods' grace, Manifests.PodGraceSeconds, and 2 min; at least 3 min).
	Poll        time.Duration
	StopTimeout time.Duration
	// PlanHosts: a failure names the plan's host (job.Hosts[].Name, a
	// node name or a pod slot) rather than the pod, as the elastic loop
	// pins failures to hosts (an elastic job's attempts).
	PlanHosts bool
}

// Nonce is a fresh control tag: ranks cannot guess it to fake control lines.
func Nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "@@pipette-" + hex.EncodeToString(b)
}

// Validate is a server-side dry run of every manifest (schemas, admission
// webhooks): nothing is stored. Its error says nothing was applied.
func Validate(ctx context.Context, k Kubectl, m *k8s.Manifests) error {
	all, err := stream(m, true)
	if err != nil {
		return err
	}
	if _, err := k.Run(ctx, all, "apply", "--server-side", "--field-manager=pipette-launch", "--dry-run=server", "-f", "-"); err != nil {
		return fmt.Errorf("the cluster refused the manifests (nothing was applied): %w", err)
	}
	return nil
}

// stream is the manifests as one YAML stream, the Secret first when asked.
func stream(m *k8s.Manifests, secret bool) ([]byte, error) {
	var b bytes.Buffer
	if secret && m.Secret != nil {
		s, err := k8s.ObjectYAML(m.Secret)
		if err != nil {
			return nil, err
		}
		b.Write(s)
		b.WriteString("---\n")
	}
	for i, o := range m.Objects {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := k8s.ObjectYAML(o)
		if err != nil {
			return nil, err
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

// podState is one pod as the poller last saw it.
type podState struct {
	name     string // the object's name (hostname plus a suffix)
	hostname string
	phase    string
	started  bool   // the container runs or ran: its log can be read
	exitCode int    // -1 until terminated
	waiting  string // reason the container waits (ErrImageNeverPull ...)
	message  string
	// node is the node it was scheduled to; deleting: it has a deletion
	// timestamp; disruption is its DisruptionTarget condition's reason and
	// message ("" when it has none): disruption.go.
	node       string
	deleting   bool
	disruption string
}

// failingWait are waiting reasons that never resolve on their own.
var failingWait = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// defaultStopTimeout is Options.StopTimeout's default: the pods' grace
// and 2 min, at least 3 min, so a pod given a long --stop-grace is waited
// out rather than reported as left behind.
func defaultStopTimeout(m *k8s.Manifests) time.Duration {
	return max(3*time.Minute, time.Duration(m.PodGraceSeconds)*time.Second+2*time.Minute)
}

// Launch applies m (validated first), streams its pods' output and
// supervises it until it succeeds, a rank fails, or ctx ends; then it
// deletes what it applied and waits until no pod is left. The error is a
// *launch.JobFailure on a failure or interruption.
func Launch(ctx context.Context, m *k8s.Manifests, tag string, o Options) error {
	if o.Poll == 0 {
		o.Poll = time.Second
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = defaultStopTimeout(m)
	}
	if m.Kind != "JobSet" {
		return fmt.Errorf("kubernetes: run supervises a JobSet; %s is for --dry-run and --output-dir", m.Kind)
	}
	if err := Validate(ctx, o.Kubectl, m); err != nil {
		return err
	}
	all, err := stream(m, true)
	if err != nil {
		return err
	}
	if _, err := o.Kubectl.Run(ctx, all, "apply", "--server-side", "--field-manager=pipette-launch", "-f", "-"); err != nil {
		// Part may exist: remove it.
		_ = cleanup(context.Background(), m, o)
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(o.Out, "pipette-launch: JobSet %s/%s applied: %d pods, MASTER_ADDR=%s\n", m.Namespace, m.Name, len(m.Pods), m.MasterAddr)
	s := newSupervisor(m, tag, o)
	failure := s.run(ctx)
	// While the pods stop, their ranks' exits still arrive: the ranks that
	// failed on their own after the first, and those we stopped.
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for ev := range s.events {
			if failure != nil {
				countAfter(failure, ev)
			}
		}
	}()
	stopErr := cleanup(context.Background(), m, o)
	s.wg.Wait() // the log streams end with their pods
	close(s.events)
	<-drained
	if failure != nil {
		failure.StopErr = stopErr
		failure.LastLines = s.tail(failure.Rank)
		return failure
	}
	return stopErr
}

// cleanup deletes the JobSet and what came with it, then waits until no
// pod or Job of it is left, and none of the objects it applied: a next
// attempt of an elastic job starts on a clean slate.
func cleanup(ctx context.Context, m *k8s.Manifests, o Options) error {
	ns := "--namespace=" + m.Namespace
	if _, err := o.Kubectl.Run(ctx, nil, "delete", "jobset.jobset.x-k8s.io/"+m.Name, ns, "--ignore-not-found", "--wait=false"); err != nil {
		return fmt.Errorf("delete JobSet %s: %w", m.Name, err)
	}
	var objs []string
	for _, ob := range append(slices.Clone(m.Objects), m.Secret) {
		if ob == nil || ob["kind"] == "JobSet" {
			continue
		}
		objs = append(objs, strings.ToLower(ob["kind"].(string))+"/"+ob["metadata"].(k8s.Object)["name"].(string))
	}
	if _, err := o.Kubectl.Run(ctx, nil, append([]string{"delete", ns, "--ignore-not-found", "--wait=false"}, objs...)...); err != nil {
		return fmt.Errorf("delete %s: %w", strings.Join(objs, ", "), err)
	}
	deadline := time.Now().Add(o.StopTimeout)
	for _, q := range [][]string{
		{"get", "pods,jobs", ns, "-l", "jobset.sigs.k8s.io/jobset-name=" + m.Name, "-o", "name"},
		append([]string{"get", ns, "--ignore-not-found", "-o", "name", "jobset.jobset.x-k8s.io/" + m.Name}, objs...),
	} {
		for {
			out, err := o.Kubectl.Run(ctx, nil, q...)
			if err == nil && len(bytes.TrimSpace(out)) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("objects of JobSet %s still exist %s after the delete: %s", m.Name, o.StopTimeout, strings.Join(strings.Fields(string(out)), " "))
			}
			time.Sleep(o.Poll)
		}
	}
	return nil
}

type supervisor struct {
	m     *k8s.Manifests
	tag   string
	o     Options
	mu    sync.Mutex
	tails map[string]map[int]*ring // pod hostname -> rank -> last lines
	exits map[int]rankExit
	// streaming: pod hostnames whose log is being read; ended: whose log
	// stream has ended.
	streaming, ended map[string]bool
	// seen: pod hostnames the poller has listed (one gone since was
	// deleted); notReady: the nodes of the job's pods found not Ready at
	// the last look (disruption.go), polls counts the polls.
	seen map[string]bool
	// disrupted: pods a listing or the watch showed with a
	// DisruptionTarget, by hostname (under mu: the watch writes it):
	// Kubernetes removes an evicted pod soon after its containers stop,
	// often before the failure is explained.
	disrupted map[string]podState
	notReady  map[string]string
	polls     int
	events    chan event
	wg        sync.WaitGroup
	outMu     sync.Mutex
}

type rankExit struct {
	code int
	byUs bool
}

type event struct {
	pod  k8s.Pod
	rank int // -1: the pod itself
	code int
	byUs bool
	why  string
}

func newSupervisor(m *k8s.Manifests, tag string, o Options) *supervisor {
	s := &supervisor{m: m, tag: tag, o: o, tails: map[string]map[int]*ring{}, exits: map[int]rankExit{},
		streaming: map[string]bool{}, ended: map[string]bool{}, seen: map[string]bool{}, disrupted: map[string]podState{}, events: make(chan event, 64)}
	for _, p := range m.Pods {
		s.tails[p.Name] = map[int]*ring{}
		for _, r := range p.Ranks {
			s.tails[p.Name][r] = &ring{}
		}
	}
	return s
}

// run polls the pods and reads the ranks' exits until the job succeeds,
// fails, or ctx ends.
func (s *supervisor) run(ctx context.Context) *launch.JobFailure {
	tick := time.NewTicker(s.o.Poll)
	defer tick.Stop()
	watching, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go s.watchDisruptions(watching)
	for {
		select {
		case <-ctx.Done():
			queued := s.drainExits()
			if s.allSucceeded() {
				// Every rank exited 0: the job's work is done, only
				// Kubernetes' bookkeeping (pods Succeeded, the JobSet
				// complete) was left, which a busy control plane takes
				// seconds to record. A stop now (a --progress-timeout
				// after the last step, an interrupt) is no failure.
				return nil
			}
			f := launch.NewInterrupted(s.m.Name, "interrupted ("+context.Cause(ctx).Error()+"): the JobSet is deleted", time.Now())
			for _, ev := range queued {
				countAfter(f, ev)
			}
			return f
		case ev := <-s.events:
			if f := s.failure(ev); f != nil || ev.byUs {
				f = s.explain(ctx, ev)
				s.note("pipette-launch: %s: %s; stopping the job", f.Host, f.Reason)
				return f
			}
		case <-tick.C:
			pods, err := s.pods(ctx)
			if err != nil {
				continue // a transient API error: the next poll tries again
			}
			s.polls++
			if lost := s.lost(ctx, pods, s.polls%nodeEvery == 0); lost != nil {
				s.note("pipette-launch: %s; stopping the job", lost.Reason)
				return lost
			}
			done := len(pods) >= len(s.m.Pods)
			for _, p := range s.m.Pods {
				st, ok := pods[p.Name]
				if !ok {
					done = false
					continue
				}
				s.follow(p, st)
				if st.waiting != "" && failingWait[st.waiting] {
					f := s.failure(event{pod: p, rank: -1, code: -1, why: fmt.Sprintf("pod %s cannot start: %s: %s", st.name, st.waiting, st.message)})
					s.note("pipette-launch: %s; stopping the job", f.Reason)
					return f
				}
				ended := s.logEnded(p.Name)
				if st.phase == "Failed" && ended && !s.allExited(p) {
					// The pod ended without its ranks' reports: the
					// entrypoint or the script itself failed.
					f := s.failure(event{pod: p, rank: -1, code: st.exitCode, why: fmt.Sprintf("pod %s ended with status %d before its ranks reported", st.name, st.exitCode)})
					s.note("pipette-launch: %s; stopping the job", f.Reason)
					return f
				}
				if st.phase != "Succeeded" || !ended {
					done = false
				}
			}
			if done {
				return nil
			}
		}
	}
}

func (s *supervisor) logEnded(pod string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended[pod]
}

// failure turns an event into the job's failure, or nil (a rank that
// succeeded or was stopped by us).
func (s *supervisor) failure(ev event) *launch.JobFailure {
	if ev.rank >= 0 {
		s.mu.Lock()
		s.exits[ev.rank] = rankExit{ev.code, ev.byUs}
		s.mu.Unlock()
		if ev.code == 0 || ev.byUs {
			return nil
		}
		local := slices.Index(ev.pod.Ranks, ev.rank)
		return &launch.JobFailure{Job: s.m.Name, Time: time.Now(), Host: s.hostOf(ev.pod), Rank: ev.rank, LocalRank: local,
			ExitCode: ev.code, Reason: fmt.Sprintf("exited with status %d (pod %s, plan host %s)", ev.code, ev.pod.Name, ev.pod.Host)}
	}
	return &launch.JobFailure{Job: s.m.Name, Time: time.Now(), Host: s.hostOf(ev.pod), Rank: -1, ExitCode: ev.code, Reason: ev.why}
}

// hostOf is the host a failure of p names: its pod, or its plan host
// (Options.PlanHosts).
func (s *supervisor) hostOf(p k8s.Pod) string {
	if s.o.PlanHosts {
		return p.Host
	}
	return p.Name
}

func (s *supervisor) allExited(p k8s.Pod) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range p.Ranks {
		if _, ok := s.exits[r]; !ok {
			return false
		}
	}
	return true
}

// countAfter counts a rank's exit that came after the job's failure f:
// stopped by its host script, or failed by itself.
func countAfter(f *launch.JobFailure, ev event) {
	if ev.rank < 0 || ev.code == 0 {
		return
	}
	if ev.byUs {
		f.StoppedAfter++
	} else {
		f.FailedAfter = append(f.FailedAfter, ev.rank)
	}
}

// drainExits records the exits still queued and returns them.
func (s *supervisor) drainExits() []event {
	var out []event
	for {
		select {
		case ev := <-s.events:
			s.failure(ev) // recorded in exits
			out = append(out, ev)
		default:
			return out
		}
	}
}

// allSucceeded reports whether every rank of every pod has exited 0 by
// itself (the exits recorded so far: drainExits first).
func (s *supervisor) allSucceeded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.m.Pods {
		for _, r := range p.Ranks {
			if e, ok := s.exits[r]; !ok || e.code != 0 || e.byUs {
				return false
			}
		}
	}
	return len(s.m.Pods) > 0
}

// getPods is kubectl get of the job's pods as JSON (the listing and the
// watch ask for the same pods).
func (s *supervisor) getPods(more ...string) []string {
	return append([]string{"get", "pods", "--namespace=" + s.m.Namespace, "-l", "jobset.sigs.k8s.io/jobset-name=" + s.m.Name, "-o", "json"}, more...)
}

// pods lists the job's pods by hostname.
func (s *supervisor) pods(ctx context.Context) (map[string]podState, error) {
	out, err := s.o.Kubectl.Run(ctx, nil, s.getPods()...)
	if err != nil {
		return nil, err
	}
	return readPods(out)
}

// podsRetried is pods, tried again twice after an error (an API
// server's hiccup must not turn a lost pod into a rank failure).
func (s *supervisor) podsRetried(ctx context.Context) (map[string]podState, error) {
	pods, err := s.pods(ctx)
	for try := 0; err != nil && try < 2 && ctx.Err() == nil; try++ {
		time.Sleep(s.o.Poll / 2)
		pods, err = s.pods(ctx)
	}
	return pods, err
}

// follow starts streaming a started pod's log, once.
func (s *supervisor) follow(p k8s.Pod, st podState) {
	if !st.started {
		return
	}
	s.mu.Lock()
	if s.streaming[p.Name] {
		s.mu.Unlock()
		return
	}
	s.streaming[p.Name] = true
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			s.ended[p.Name] = true
			s.mu.Unlock()
		}()
		// Not tied to ctx: on an interrupt the ranks' last lines and exit
		// reports still come while the pods stop.
		cmd := exec.Command(s.o.Kubectl.path(), s.o.Kubectl.args([]string{"logs", "--follow", "--namespace=" + s.m.Namespace, st.name, "-c", "ranks"})...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			s.note("pipette-launch: cannot read the log of pod %s: %v", st.name, err)
			return
		}
		s.readLog(p, out)
		_ = cmd.Wait()
	}()
}

// readLog sorts each line of a pod's log (line) until it ends. A line
// longer than lines.Max is cut, with a note, rather than ending the read:
// a log no longer read would also stall kubectl logs, and with it the
// rank exits that come after.
func (s *supervisor) readLog(p k8s.Pod, r io.Reader) {
	lines.Each(r, lines.Max, func(b []byte, dropped int64) { s.line(p, lines.Shown(b, dropped)) })
}

// line sorts one line of a pod's log: a control line, a rank's exit, or a
// rank's output (printed as host:rank: line).
func (s *supervisor) line(p k8s.Pod, line string) {
	if strings.HasPrefix(line, s.tag) {
		return // clock, pgid, wd, ranks, done: the pod's own state says the rest
	}
	rs, text, ok := strings.Cut(line, " ")
	rank, err := strconv.Atoi(rs)
	if !ok || err != nil || !slices.Contains(p.Ranks, rank) {
		s.print(fmt.Sprintf("%s: %s", p.Name, line))
		return
	}
	if rest, ok := strings.CutPrefix(text, s.tag+" exit "); ok {
		f := strings.Fields(rest)
		if len(f) >= 2 && f[0] == rs {
			code, _ := strconv.Atoi(f[1])
			s.events <- event{pod: p, rank: rank, code: code, byUs: len(f) == 4 && f[3] == "1"}
			return
		}
	}
	s.mu.Lock()
	s.tails[p.Name][rank].add(text)
	s.mu.Unlock()
	s.print(fmt.Sprintf("%s:%d: %s", p.Name, rank, text))
}

func (s *supervisor) print(line string) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	fmt.Fprintln(s.o.Out, line)
}

func (s *supervisor) note(format string, args ...any) { s.print(fmt.Sprintf(format, args...)) }

// tail is rank's last lines (none for -1: a pod's failure).
func (s *supervisor) tail(rank int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ranks := range s.tails {
		if r := ranks[rank]; r != nil {
			return slices.Clone(r.lines)
		}
	}
	return nil
}

// ring keeps a rank's last 20 lines for the summary.
type ring struct{ lines []string }

func (r *ring) add(l string) {
	r.lines = append(r.lines, l)
	if len(r.lines) > 20 {
		r.lines = r.lines[len(r.lines)-20:]
	}
}
