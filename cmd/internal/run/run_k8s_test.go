package run

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// k8sArgs is a Megatron launch on examples/two-clusters.yaml (an H100 and
// an L40S island) with --launcher k8s, on both islands (--use-all-gpus: the
// H100s alone are faster, and the tests are about a job on two islands).
func k8sArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	cluster, err := filepath.Abs("../../../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--launcher", "k8s", "--cluster", cluster, "--use-all-gpus", "--no-check-script", "--run-id", "llama"}
	args = append(args, extra...)
	return append(args, "pretrain_gpt.py", "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32",
		"--group-query-attention", "--num-query-groups", "8", "--ffn-hidden-size", "14336", "--seq-length", "8192",
		"--max-position-embeddings", "8192", "--bf16", "--swiglu", "--global-batch-size", "64", "--micro-batch-size", "1",
		"--vocab-size", "128256")
}

// TestK8sDryRunPrintsJobSet: the plan's hosts become pods of one replicated
// job per island, the entrypoint maps each pod to its node rank, and a
// secret's value is never printed.
func TestK8sDryRunPrintsJobSet(t *testing.T) {
	code, out, errOut := runCLI(t, k8sArgs(t, "--dry-run", "--k8s-image", "registry.example/train/megatron:24.09",
		"--k8s-namespace", "ml", "--env", "WANDB_API_KEY=wandb-secret-value")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"kind: JobSet", "- name: ib", "- name: eth", "namespace: ml", "nvidia.com/gpu: \"8\"",
		"# Secret ml/llama-env (applied by run, never printed) holds: WANDB_API_KEY", "MASTER_ADDR=llama-"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	if strings.Contains(out, "wandb-secret-value") {
		t.Errorf("dry run prints the secret's value")
	}
	// Four pods, each node rank exactly once, each on its island's replicated job.
	lines := regexp.MustCompile(`(?m)^    (ib|eth)/(\d)\) r=(\d) ;; # host (\S+)$`).FindAllStringSubmatch(out, -1)
	seen := map[string]bool{}
	for _, l := range lines {
		if island := strings.SplitN(l[4], "-", 2)[0]; (l[1] == "ib") != (island == "h100") {
			t.Errorf("host %s is in replicated job %s", l[4], l[1])
		}
		seen[l[3]] = true
	}
	if len(lines) != 4 || len(seen) != 4 {
		t.Errorf("entrypoint maps %d pods to %d node ranks, want 4 and 4:\n%v", len(lines), len(seen), lines)
	}
}

// TestK8sBadInputBeforeAnything: what Kubernetes would refuse is an input
// error (exit 2) naming the flag, before kubectl is ever run (--kubectl
// names a program that does not exist, so any call would fail otherwise).
func TestK8sBadInputBeforeAnything(t *testing.T) {
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--k8s-image", "Bad Image!"}, `image "Bad Image!"`},
		{[]string{"--k8s-image", "a:1", "--k8s-namespace", "ML_team"}, `namespace "ML_team"`},
		{[]string{"--k8s-image", "a:1", "--k8s-label", "team=a b"}, `label team="a b"`},
		{[]string{"--k8s-image", "a:1", "--k8s-label", "novalue"}, `--k8s-label`},
		{[]string{}, "image: required"},
		{[]string{"--k8s-image", "a:1", "--k8s-format", "trainjob"}, "2 islands"},
		{[]string{"--k8s-image", "a:1", "--log-dir", "logs"}, "--log-dir is not supported with --launcher k8s"},
		{[]string{"--k8s-image", "a:1", "--preflight"}, "--preflight is not supported with --launcher k8s"},
	} {
		code, _, errOut := runCLI(t, k8sArgs(t, append(c.flags, "--kubectl", "/nonexistent/kubectl")...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %q", c.flags, code, errOut, c.want)
		}
		if strings.Contains(errOut, "/nonexistent/kubectl") {
			t.Errorf("%v: kubectl was run: %s", c.flags, errOut)
		}
	}
}

// TestK8sOutputDirWritesManifests: one file per object, never the Secret.
func TestK8sOutputDirWritesManifests(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, k8sArgs(t, "--output-dir", dir, "--k8s-image", "a:1", "--env", "HF_TOKEN=hf-secret")...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	var all strings.Builder
	for _, n := range names {
		b, _ := os.ReadFile(n)
		all.Write(b)
	}
	if len(names) != 3 || !strings.Contains(all.String(), "kind: JobSet") || strings.Contains(all.String(), "hf-secret") {
		t.Errorf("wrote %v; want Service, ConfigMap and JobSet, no secret value", names)
	}
	if !strings.Contains(out, "not written: Secret llama-env with HF_TOKEN") {
		t.Errorf("output does not say the Secret was not written:\n%s", out)
	}
}

// TestK8sElasticLineRunsAttempts: --launcher k8s takes an elastic line
// (--nnodes MIN:MAX with --max-restarts) and --progress-timeout: a dry run
// prints the first attempt's JobSet, and a launch goes through the
// elastic loop, whose health check (the nodes, through kubectl) leaves
// out every host when kubectl cannot be run, and says why.
func TestK8sElasticLineRunsAttempts(t *testing.T) {
	elastic := []string{"--k8s-image", "a:1", "--nnodes", "2:4", "--max-restarts", "2", "--progress-timeout", "10m"}
	code, out, errOut := runCLI(t, k8sArgs(t, append(elastic, "--dry-run")...)...)
	if code != 0 || !strings.Contains(out, "kind: JobSet") {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, k8sArgs(t, append(elastic, "--kubectl", "/nonexistent/kubectl")...)...)
	for _, want := range []string{"elastic job: 2 to 4 of 4 hosts, up to 2 restarts", "failed its check: node h100-01: kubectl not found (/nonexistent/kubectl)",
		"STOPPED: 0 hosts left, fewer than MIN 2"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, want, errOut)
		}
	}
}
