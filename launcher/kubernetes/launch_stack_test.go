package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/templates/k8s"
	"github.com/pipette-launch/pipette-launch/testbed/kube"
)

// TorchImage is the test image: Debian's python3 and python3-torch from
// this machine, imported into the kubelet's containerd (nothing is pulled).
const TorchImage = "pipette/torch:test"

// allreduceJob builds what the render step would for hosts x perHost ranks
// of examples/torch_allreduce.py (gloo, CPU) with torchrun's environment;
// MASTER_ADDR is replaced by Render with rank 0's pod.
func allreduceJob(t *testing.T, name string, hosts []string, perHost int, args ...string) *job.Job {
	t.Helper()
	script, err := os.ReadFile("../../examples/torch_allreduce.py")
	if err != nil {
		t.Fatal(err)
	}
	world := len(hosts) * perHost
	j := &job.Job{Name: name, WorkDir: "/tmp/" + name, FilesDir: ".pipette-launch/jobs/" + name,
		Files: []job.File{{Path: "torch_allreduce.py", Mode: 0o644, Content: script}}}
	for n, h := range hosts {
		hj := job.HostJob{Name: h, NodeRank: n}
		for l := 0; l < perHost; l++ {
			rank := n*perHost + l
			env := []job.EnvVar{
				{Name: "GLOO_SOCKET_IFNAME", Value: "eth0"}, {Name: "GROUP_RANK", Value: strconv.Itoa(n)},
				{Name: "LOCAL_RANK", Value: strconv.Itoa(l)}, {Name: "LOCAL_WORLD_SIZE", Value: strconv.Itoa(perHost)},
				{Name: "MASTER_ADDR", Value: hosts[0]}, {Name: "MASTER_PORT", Value: "29500"},
				{Name: "OMP_NUM_THREADS", Value: "1"}, {Name: "RANK", Value: strconv.Itoa(rank)},
				{Name: "WORLD_SIZE", Value: strconv.Itoa(world)},
			}
			argv := append([]string{"/usr/bin/python3", ".pipette-launch/jobs/" + name + "/torch_allreduce.py", "--expect-world", strconv.Itoa(world)}, args...)
			hj.Ranks = append(hj.Ranks, job.RankJob{Rank: rank, LocalRank: l, Env: env, Argv: argv})
		}
		j.Hosts = append(j.Hosts, hj)
	}
	return j
}

// TestLaunchGlooJobOnKubelet: on a real kubelet, the rendered JobSet's two
// pods run the host script, two gloo ranks each, which meet at rank 0's pod
// by its DNS name and all-reduce; every rank's output comes back as
// pod:rank: lines. A job whose rank 3 fails is stopped: the summary names
// rank 3, its pod and exit code, and no pod of it is left.
func TestLaunchGlooJobOnKubelet(t *testing.T) {
	s := kube.New(t, kube.Kubelet)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	if err := s.ImportImage(ctx, TorchImage, "python3", "python3-torch"); err != nil {
		t.Fatal(err)
	}
	t.Logf("torch image imported in %s", time.Since(start).Round(time.Second))
	islands := []k8s.Island{{Name: "cpu", Hosts: []string{"cpu-0", "cpu-1"}}}
	kubectl := Kubectl{Path: s.Bin + "/kubectl", Kubeconfig: s.Kubeconfig}
	run := func(name string, args ...string) (string, error) {
		tag := Nonce()
		m, err := k8s.Render(allreduceJob(t, name, islands[0].Hosts, 2, args...), islands, k8s.Options{Name: name,
			Image: TorchImage, ImagePullPolicy: "Never", Affinity: k8s.AffinityNone, Control: &job.Control{Tag: tag, Grace: 5}})
		if err != nil {
			t.Fatal(err)
		}
		var out syncBuffer
		start := time.Now()
		lctx, stop := context.WithCancel(ctx)
		defer stop()
		if slices.Contains(args, "--sleep") {
			// The interrupt (SIGINT/SIGTERM in the CLI) comes once every
			// rank is sleeping.
			go func() {
				for strings.Count(out.String(), ": sleeping") < 4 && lctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
				}
				stop()
			}()
		}
		err = Launch(lctx, m, tag, Options{Kubectl: kubectl, Out: &out, Poll: 300 * time.Millisecond})
		t.Logf("%s: %s", name, time.Since(start).Round(100*time.Millisecond))
		left, _ := s.Kubectl(context.Background(), nil, "get", "pods,jobsets,configmaps,services,secrets", "-l", k8s.LabelJob+"="+name, "-o", "name")
		if len(strings.TrimSpace(string(left))) > 0 {
			t.Errorf("%s left behind: %s", name, left)
		}
		return out.String(), err
	}

	out, err := run("gloo-ok")
	if err != nil {
		t.Fatalf("gloo-ok: %v\noutput:\n%s", err, out)
	}
	for r := 0; r < 4; r++ {
		pod := fmt.Sprintf("gloo-ok-cpu-0-%d", r/2)
		if !strings.Contains(out, fmt.Sprintf("%s:%d: ALLREDUCE OK rank=%d sum=10", pod, r, r)) {
			t.Errorf("rank %d did not all-reduce on %s:\n%s", r, pod, out)
		}
	}
	if !strings.Contains(out, "MASTER_ADDR=gloo-ok-cpu-0-0.gloo-ok") {
		t.Errorf("ranks did not get MASTER_ADDR=gloo-ok-cpu-0-0.gloo-ok:\n%s", out)
	}

	out, err = run("gloo-fail", "--fail-rank", "3", "--exit-code", "7")
	var f *launch.JobFailure
	if !errors.As(err, &f) {
		t.Fatalf("gloo-fail: err = %v, want a job failure\noutput:\n%s", err, out)
	}
	summary := f.Error()
	for _, want := range []string{"rank      : 3 (local_rank: 1)", "host      : gloo-fail-cpu-0-1", "exitcode  : 7", "failing on purpose with exit code 7"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s\noutput:\n%s", want, summary, out)
		}
	}
	if f.StopErr != nil {
		t.Errorf("stop: %v", f.StopErr)
	}

	// Interrupted while every rank sleeps: the JobSet is deleted, the
	// ranks are stopped (SIGTERM through the pods' deletion), nothing is
	// left, and the summary says it was interrupted.
	start = time.Now()
	out, err = run("gloo-int", "--sleep", "300")
	if !errors.As(err, &f) || !f.Interrupted() && !strings.Contains(f.Reason, "interrupted") {
		t.Fatalf("gloo-int: err = %v, want an interruption\noutput:\n%s", err, out)
	}
	if d := time.Since(start); d > 4*time.Minute {
		t.Errorf("interrupted job took %s to stop", d)
	}
}
