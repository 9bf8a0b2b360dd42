package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/testbed/kube"
)

// TestK8sRunOnKubelet: `run --launcher k8s` on a real kubelet (the
// project's test-bed, an image of Debian's python3 and python3-torch):
// 2 pods x 2 gloo ranks of examples/torch_allreduce.py meet at rank 0's pod
// by its DNS name and all-reduce, their output streamed as pod:rank:
// lines; a run whose rank 3 fails exits non-zero with the SSH path's
// summary naming rank 3, and no pod or object of either run is left.
func TestK8sRunOnKubelet(t *testing.T) {
	// Mostly waits for the stack (and for its machine-wide lock): beside
	// the test-bed tests (run_testbed_test.go), in a clean environment
	// given to run rather than set (cmdtest.CleanEnviron).
	t.Parallel()
	env := cmdtest.CleanEnviron(t)
	s, script, cfg := torchOnKubelet(t, "torch_allreduce.py")
	run := func(name string, args ...string) (int, string, string) {
		// The script travels in argv (python3 -c): the image holds only
		// Debian's python3 and torch.
		argv := append([]string{"run", "--launcher", "k8s", "--kubeconfig", s.Kubeconfig, "--kubectl", filepath.Join(s.Bin, "kubectl"),
			"--k8s-config", cfg, "--hosts", "cpu-0,cpu-1", "--nproc-per-node", "2", "--run-id", name, "--stop-grace", "5s",
			"--no-python", "--no-check-script", "/usr/bin/python3", "-c", string(script), "--expect-world", "4"}, args...)
		start := time.Now()
		code, out, errOut := cmdtest.Run(testApp(func(o *Options) { o.Env = env }), argv...)
		t.Logf("%s: exit %d in %s", name, code, time.Since(start).Round(100*time.Millisecond))
		left, err := s.Kubectl(context.Background(), nil, "get", "pods,jobsets,configmaps,services,secrets", "-l", "pipette-launch/job="+name, "-o", "name")
		if err != nil || len(strings.TrimSpace(string(left))) > 0 {
			t.Errorf("%s left behind: %s %v", name, left, err)
		}
		return code, out, errOut
	}

	code, out, errOut := run("gloo-ok")
	if code != 0 {
		t.Fatalf("gloo-ok: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for r, pod := range []string{"gloo-ok-hosts-0-0", "gloo-ok-hosts-0-0", "gloo-ok-hosts-0-1", "gloo-ok-hosts-0-1"} {
		want := pod + ":" + string(rune('0'+r)) + ": ALLREDUCE OK rank=" + string(rune('0'+r)) + " sum=10"
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}

	code, out, errOut = run("gloo-fail", "--fail-rank", "3", "--exit-code", "7")
	if code == 0 {
		t.Fatalf("gloo-fail: exit 0\n%s", out)
	}
	for _, want := range []string{"gloo-fail FAILED: rank 3 (local_rank 1) on gloo-fail-hosts-0-1", "exitcode  : 7", "rank 3: failing on purpose with exit code 7"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("summary lacks %q:\nstderr:\n%s\nstdout:\n%s", want, errOut, out)
		}
	}
}

// torchOnKubelet is the kubelet stack with the torch image imported
// (Debian's python3 and python3-torch), example's text (it travels in
// argv, python3 -c: the image holds no script) and a --k8s-config file
// for it (affinity none: the stack has one node).
func torchOnKubelet(t *testing.T, example string) (*kube.Stack, []byte, string) {
	t.Helper()
	s := kube.New(t, kube.Kubelet)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := s.ImportImage(ctx, "pipette/torch:test", "python3", "python3-torch"); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../../examples/" + example)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "k8s.yaml")
	if err := os.WriteFile(cfg, []byte("image: pipette/torch:test\nimagePullPolicy: Never\naffinity: none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return s, script, cfg
}
