package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed/kube"
)

// TestK8sElasticOnKubelet (issue 30): an elastic line (--nnodes 2:3) on a
// real kubelet, 3 pod slots (affinity none: the stack has one node) of
// examples/torch_elastic.py, a real gloo job that checkpoints to a
// hostPath volume every pod shares (added by --k8s-pod-patch). Once it
// saved step 4, cpu-1's pod is evicted through the Eviction API (what a
// node drain does; Kubernetes marks it DisruptionTarget): the job is
// re-created as a new JobSet on the 2 slots left, resumes from its last
// checkpoint and finishes; the summary blames cpu-1 as lost, and no
// object of either attempt is left. Then --progress-timeout stops a job
// that hangs, elastic or not.
func TestK8sElasticOnKubelet(t *testing.T) {
	s, script, cfg := torchOnKubelet(t, "torch_elastic.py")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt") // on the one node: every pod's hostPath
	if err := os.Mkdir(ckpt, 0o777); err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(dir, "patch.yaml")
	if err := os.WriteFile(patch, []byte(fmt.Sprintf(`volumes:
- name: ckpt
  hostPath: {path: %s, type: Directory}
containers:
- name: ranks
  volumeMounts:
  - {name: ckpt, mountPath: /ckpt}
`, ckpt)), 0o644); err != nil {
		t.Fatal(err)
	}
	// argv runs the job as name, its checkpoint in its own directory.
	argv := func(name string, flags []string, scriptArgs ...string) []string {
		if err := os.Mkdir(filepath.Join(ckpt, name), 0o777); err != nil {
			t.Fatal(err)
		}
		a := append([]string{"pipette-launch", "run", "--launcher", "k8s", "--kubeconfig", s.Kubeconfig, "--kubectl", filepath.Join(s.Bin, "kubectl"),
			"--k8s-config", cfg, "--k8s-pod-patch", patch, "--hosts", "cpu-0,cpu-1,cpu-2", "--nproc-per-node", "1", "--run-id", name,
			"--stop-grace", "5s"}, flags...)
		a = append(a, "--no-python", "--no-check-script", "/usr/bin/python3", "-c", string(script), "--ckpt-dir", "/ckpt/"+name)
		return append(a, scriptArgs...)
	}
	const name = "elastic"
	args := argv(name, []string{"--nnodes", "2:3", "--max-restarts", "2", "--rejoin-interval", "0"}, "--steps", "16", "--step-time", "0.5")

	var out, errOut syncbuf.Buffer
	evicted := make(chan []time.Time, 1)
	running, ended := context.WithCancel(ctx) // the marks are not waited for past the run's end
	defer ended()
	go func() {
		defer close(evicted)
		ctx := running
		for !strings.Contains(out.String(), "SAVED step 4\n") {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		pod, err := podOfHostname(ctx, s, name+"-a1-hosts-0-1") // cpu-1's pod (node rank 1)
		if err != nil {
			t.Errorf("cpu-1's pod: %v", err)
			return
		}
		ev := fmt.Sprintf(`{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":%q,"namespace":"default"}}`, pod)
		if b, err := s.Kubectl(ctx, []byte(ev), "create", "--raw", "/api/v1/namespaces/default/pods/"+pod+"/eviction", "-f", "-"); err != nil {
			t.Errorf("evict %s: %v %s", pod, err, b)
			return
		}
		at := time.Now()
		if b, err := s.Kubectl(ctx, nil, "get", "pod", pod, "-o", "json"); err == nil {
			t.Logf("the evicted pod, as kubectl get pod -o json shows it:\n%s", b)
		}
		evicted <- timeline(ctx, at,
			func() bool { return strings.Contains(errOut.String(), "restarting on 2 hosts") },
			func() bool { return strings.Contains(out.String(), "RESUMED from step") },
			resumedAndStepped(&out))
	}()
	start := time.Now()
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	ended()
	t.Logf("exit %d in %s", code, time.Since(start).Round(100*time.Millisecond))
	marks, wasEvicted := <-evicted
	o, e := out.String(), errOut.String()
	if !wasEvicted || code != 0 {
		t.Fatalf("exit %d (evicted: %v)\nstdout:\n%s\nstderr:\n%s", code, wasEvicted, o, e)
	}
	// The second attempt: a JobSet of its own, 2 ranks on the 2 slots
	// left, resumed from a checkpoint at step 4 or later; the weight every
	// step added to is whole (none lost, none counted twice).
	resumed := regexp.MustCompile(`(?m)^`+name+`-a2-hosts-0-[01]:\d: RESUMED from step (\d+) world 2 restart 1`).FindAllStringSubmatch(o, -1)
	if step, _ := strconv.Atoi(firstMatch(resumed)); len(resumed) != 2 || step < 4 {
		t.Errorf("want 2 ranks of attempt 2 resumed at step >= 4, got %v\nstdout:\n%s", resumed, o)
	}
	if n := strings.Count(o, "DONE step 16 w 16 world 2"); n != 2 {
		t.Errorf("%d ranks report DONE step 16 w 16 world 2, want 2\nstdout:\n%s", n, o)
	}
	for _, w := range []string{"finished on 2 hosts after 1 restart", "attempt 1 (restart 0): 3 hosts: cpu-0 cpu-1 cpu-2",
		"attempt 2 (restart 1): 2 hosts: cpu-0 cpu-2", "dropped    : cpu-1", "blamed     : cpu-1 lost", "DisruptionTarget EvictionByEvictionAPI",
		"first step :"} {
		if !strings.Contains(e, w) {
			t.Errorf("stderr lacks %q\nstderr:\n%s", w, e)
		}
	}
	// Nothing of any attempt is left (launcher/kubernetes waited for it).
	left, err := s.Kubectl(context.Background(), nil, "get", "pods,jobs,jobsets,configmaps,services,secrets", "-l", LabelRun+"="+name, "-o", "name")
	if err != nil || len(strings.TrimSpace(string(left))) > 0 {
		t.Errorf("left behind: %s %v", left, err)
	}
	if len(marks) == 4 {
		sec := func(i int) float64 { return marks[i].Sub(marks[0]).Seconds() }
		t.Logf("TIMELINE eviction -> loss declared and attempt 1 deleted %.1fs -> attempt 2's first rank up %.1fs -> its first step %.1fs", sec(1), sec(2), sec(3))
	}
	t.Logf("stderr:\n%s", e)

	// --progress-timeout on the pods' lines: every rank stops printing at
	// step 3, so no host is to blame; with --max-restarts 0 the elastic
	// job stops saying it hung, a job on fixed hosts is stopped as hung,
	// and one on fixed hosts with --max-restarts 1 is restarted (a JobSet
	// of its own) and finishes. Nothing of any is left.
	for _, c := range []struct {
		name  string
		flags []string
		want  []string
	}{
		{"hang-elastic", []string{"--nnodes", "2:3", "--max-restarts", "0"}, []string{"STOPPED: 0 restarts done, --max-restarts 0",
			"ended      : the job hung: no new step for 8s (--progress-timeout 8s) after step 3; every host silent as long: no host to blame"}},
		{"hang-fixed", nil, []string{"pipette-launch: job hang-fixed stopped as hung: no new step for 8s"}},
		// A fixed set of hosts with restarts: the hang (first attempt only)
		// restarts the job as a new JobSet, which resumes and finishes.
		{"hang-fixed-restart", []string{"--max-restarts", "1"}, []string{"finished on 3 hosts after 1 restart",
			"hang-fixed-restart-a2-hosts-0-0:0: RESUMED from step 2 world 3 restart 1", "DONE step 6"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			steps, code := []string{"--steps", "40"}, 1
			if slices.Contains(c.flags, "--max-restarts") && !slices.Contains(c.flags, "--nnodes") {
				steps, code = []string{"--steps", "6", "--hang-restarts", "1"}, 0
			}
			got, o, e := runCLI(t, argv(c.name, append(c.flags, "--progress-timeout", "8s"), append(steps, "--step-time", "0.3", "--hang-at-step", "3")...)[1:]...)
			for _, w := range c.want {
				if got != code || !strings.Contains(o+e, w) {
					t.Errorf("exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s", got, code, w, o, e)
				}
			}
			left, err := s.Kubectl(context.Background(), nil, "get", "pods,jobs,jobsets,configmaps,services,secrets", "-o", "name")
			if err != nil || strings.Contains(string(left), c.name) {
				t.Errorf("left behind: %s %v", left, err)
			}
		})
	}
}

// podOfHostname is the name of the pod whose hostname is hostname.
func podOfHostname(ctx context.Context, s *kube.Stack, hostname string) (string, error) {
	b, err := s.Kubectl(ctx, nil, "get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.hostname}{"\n"}{end}`)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if pod, h, ok := strings.Cut(l, " "); ok && h == hostname {
			return pod, nil
		}
	}
	return "", fmt.Errorf("no pod with hostname %s in:\n%s", hostname, b)
}
