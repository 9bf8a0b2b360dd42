package k8s

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/golden"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// llamaArgs are Megatron-LM arguments for llama3-8b's shape.
var llamaArgs = []string{"--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32",
	"--group-query-attention", "--num-query-groups", "8", "--ffn-hidden-size", "14336",
	"--seq-length", "8192", "--max-position-embeddings", "8192", "--bf16", "--swiglu"}

// Example is a real plan on examples/two-clusters.yaml (2 x 8 H100 on
// InfiniBand, 2 x 8 L40S on Ethernet): llama3-8b, TP 8, PP 2, DP 2, ranks
// in torchrun's order, so pipeline stage 0 is the H100 island and stage 1
// the L40S island.
func exampleJob(t testing.TB, env []string, explicit []job.EnvVar) (*job.Job, []Island) {
	t.Helper()
	data, err := os.ReadFile("../../examples/two-clusters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Preset("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	cfg := parallel.Config{TP: 8, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64,
		Recompute: parallel.RecomputeFull, DistributedOptimizer: true, SequenceParallel: true, StageLayers: []int{16, 16}}
	p, err := search.PriceOrder(c, m, cfg, parallel.FrameworkMegatron, []int{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	j, err := templates.Render(&p, c, templates.Options{Name: "llama-two-islands", Script: "pretrain_gpt.py", Args: llamaArgs,
		WorkDir: "/workspace", Env: env, ExplicitEnv: explicit})
	if err != nil {
		t.Fatal(err)
	}
	return j, IslandsOf(c)
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

func TestRenderGolden(t *testing.T) {
	secretEnv := []job.EnvVar{{Name: "WANDB_API_KEY", Value: "wandb-secret-value"}, {Name: "DATA_ROOT", Value: "/data"}}
	cases := []struct {
		name     string
		env      []string
		explicit []job.EnvVar
		opts     Options
	}{
		{name: "jobset_two_islands.yaml", opts: Options{Image: "registry.example/train/megatron:24.09"}},
		{name: "jobset_options.yaml", env: []string{"NCCL_DEBUG=INFO", "HOME=/root"}, explicit: secretEnv, opts: Options{
			Name: "llama", Namespace: "ml", Image: "registry.example/train/megatron:24.09", ServiceAccount: "trainer",
			PriorityClass: "high", Queue: "team-a", SchedulerName: "volcano", Labels: map[string]string{"team": "a"},
			Affinity: AffinityGPUProduct, GPUProducts: map[string]string{"eth": "NVIDIA-L40S"},
			PodPatch: map[string]any{"tolerations": []any{map[string]any{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}},
				"terminationGracePeriodSeconds": 60}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j, islands := exampleJob(t, tc.env, tc.explicit)
			m, err := Render(j, islands, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(out, []byte("wandb-secret-value")) {
				t.Fatalf("the printed manifests hold a secret's value:\n%s", out)
			}
			checkGolden(t, tc.name, out)
		})
	}
}

// TestRenderPodsFollowPlan checks each pod's node rank, ranks and
// environment against the job the SSH path runs.
func TestRenderPodsFollowPlan(t *testing.T) {
	j, islands := exampleJob(t, nil, []job.EnvVar{{Name: "HF_TOKEN", Value: "hf-secret"}})
	m, err := Render(j, islands, Options{Image: "train:1"})
	if err != nil {
		t.Fatal(err)
	}
	wantMaster := "llama-two-islands-ib-0-0.llama-two-islands"
	if m.MasterAddr != wantMaster {
		t.Errorf("MasterAddr = %q, want %q", m.MasterAddr, wantMaster)
	}
	wantPods := []string{"llama-two-islands-ib-0-0", "llama-two-islands-ib-0-1", "llama-two-islands-eth-0-0", "llama-two-islands-eth-0-1"}
	cm := m.Objects[1]["data"].(Object)
	entry := cm["entrypoint.sh"].(string)
	for nr, p := range m.Pods {
		if p.NodeRank != nr || p.Name != wantPods[nr] || p.Host != j.Hosts[nr].Name {
			t.Errorf("pod %d = %+v, want node rank %d, name %s, host %s", nr, p, nr, wantPods[nr], j.Hosts[nr].Name)
		}
		for i, r := range j.Hosts[nr].Ranks {
			if p.Ranks[i] != r.Rank {
				t.Errorf("pod %s local rank %d is rank %d, the plan has %d", p.Name, i, p.Ranks[i], r.Rank)
			}
		}
		// The entrypoint maps this pod's replicated job and index to its node rank.
		line := regexp.MustCompile(`(?m)^` + p.RJob + `/` + itoa(p.Index) + `\) r=(\d+) ;;`).FindStringSubmatch(entry)
		if line == nil || line[1] != itoa(nr) {
			t.Errorf("entrypoint does not map %s/%d to node rank %d:\n%s", p.RJob, p.Index, nr, entry)
		}
		script := cm["host-"+itoa(nr)+".sh"].(string)
		if !strings.Contains(script, "MASTER_ADDR="+wantMaster) {
			t.Errorf("host script %d lacks MASTER_ADDR=%s", nr, wantMaster)
		}
		if strings.Contains(script, "hf-secret") {
			t.Errorf("host script %d holds the secret's value", nr)
		}
		// The rest of the script is the SSH path's, rank by rank.
		for _, r := range j.Hosts[nr].Ranks {
			for _, e := range r.Env {
				if e.Name == "MASTER_ADDR" || templates.Secret(e.Name) {
					continue
				}
				if !strings.Contains(script, e.Name+"=") {
					t.Errorf("host script %d lacks %s", nr, e.Name)
				}
			}
		}
	}
	if m.Secret == nil || m.Secret["stringData"].(Object)["HF_TOKEN"] != "hf-secret" {
		t.Errorf("Secret = %v, want HF_TOKEN in it", m.Secret)
	}
}

func TestRenderTrainJob(t *testing.T) {
	j, islands := exampleJob(t, nil, nil)
	if _, err := Render(j, islands, Options{Image: "train:1", Format: FormatTrainJob}); err == nil || !strings.Contains(err.Error(), "2 islands") {
		t.Fatalf("two-island TrainJob: err = %v, want the one-island limit", err)
	}
	// One island: the H100 hosts alone (node ranks 0 and 1).
	one := *j
	one.Hosts = j.Hosts[:2]
	for i := range one.Hosts {
		one.Hosts[i].Ranks = one.Hosts[i].Ranks[:8]
	}
	m, err := Render(&one, islands[:1], Options{Image: "train:1", Format: FormatTrainJob})
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "trainjob_one_island.yaml", out)
	// A TrainJob cannot set its pods' termination grace: the warning names
	// what the runtime must give them (the scripts' grace and the margin).
	for _, grace := range []int{0, 120} {
		one.StopGrace = grace
		m, err := Render(&one, islands[:1], Options{Image: "train:1", Format: FormatTrainJob})
		if err != nil {
			t.Fatal(err)
		}
		want := map[int]string{0: "give ranks 30 s between SIGTERM and SIGKILL (--stop-grace): give the runtime terminationGracePeriodSeconds of at least 45",
			120: "give ranks 120 s between SIGTERM and SIGKILL (--stop-grace): give the runtime terminationGracePeriodSeconds of at least 135"}[grace]
		if !strings.Contains(strings.Join(m.Warnings, "\n"), want) {
			t.Errorf("scripts' grace %d: warnings %q lack %q", grace, m.Warnings, want)
		}
	}
	one.StopGrace = 0
	if _, err := Render(&one, islands[:1], Options{Image: "train:1", Format: FormatTrainJob, PriorityClass: "high"}); err == nil {
		t.Errorf("TrainJob with a priority class rendered; Trainer's runtime patch cannot carry it")
	}
}

// TestRenderRefusesBadInput: what Kubernetes would refuse is an error
// naming the input, before anything exists to apply.
func TestRenderRefusesBadInput(t *testing.T) {
	j, islands := exampleJob(t, nil, nil)
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"no image", Options{}, "image: required"},
		{"image with space", Options{Image: "Bad Image!"}, `image "Bad Image!"`},
		{"image upper case", Options{Image: "Registry/Train"}, `image "Registry/Train"`},
		{"namespace", Options{Image: "a:1", Namespace: "ML_Team"}, `namespace "ML_Team"`},
		{"label value", Options{Image: "a:1", Labels: map[string]string{"team": "a b"}}, `label team="a b"`},
		{"label key", Options{Image: "a:1", Labels: map[string]string{"-team": "a"}}, `label "-team"`},
		{"name", Options{Image: "a:1", Name: "3train"}, `name "3train"`},
		{"name too long for pods", Options{Image: "a:1", Name: strings.Repeat("x", 50)}, "longer than 63"},
		{"queue", Options{Image: "a:1", Queue: "team a"}, `queue "team a"`},
		{"service account", Options{Image: "a:1", ServiceAccount: "Trainer"}, `service account "Trainer"`},
		{"pull policy", Options{Image: "a:1", ImagePullPolicy: "Sometimes"}, "image pull policy"},
		{"format", Options{Image: "a:1", Format: "pytorchjob"}, `format "pytorchjob"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(j, islands, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	got := mergePatch(map[string]any{"a": 1, "b": map[string]any{"c": 2, "d": 3}, "e": []any{1}},
		map[string]any{"a": nil, "b": map[string]any{"c": 5}, "e": []any{2, 3}, "f": "x"})
	want := map[string]any{"b": map[string]any{"c": 5, "d": 3}, "e": []any{2, 3}, "f": "x"}
	g, _ := ObjectYAML(got.(map[string]any))
	w, _ := ObjectYAML(want)
	if !bytes.Equal(g, w) {
		t.Errorf("merge patch:\n%s\nwant\n%s", g, w)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestReadOptionsAndFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "k8s.yaml")
	os.WriteFile(file, []byte("image: a:1\nnamespace: ml\nlabels: {team: a}\npodPatch:\n  tolerations: [{key: x, operator: Exists}]\n"), 0o644)
	o, err := ReadOptions(file)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := ParseLabels([]string{"run=7"})
	if err != nil {
		t.Fatal(err)
	}
	o = o.Over(Options{Image: "b:2", Labels: labels})
	if o.Image != "b:2" || o.Namespace != "ml" || o.Labels["team"] != "a" || o.Labels["run"] != "7" || o.PodPatch["tolerations"] == nil {
		t.Errorf("options = %+v", o)
	}
	os.WriteFile(file, []byte("image: a:1\nimagePulPolicy: Never\n"), 0o644)
	if _, err := ReadOptions(file); err == nil || !strings.Contains(err.Error(), "imagePulPolicy") {
		t.Errorf("misspelt field: err = %v", err)
	}
	if _, err := ParseLabels([]string{"novalue"}); err == nil {
		t.Errorf("label without = accepted")
	}
}

// TestPodPatchMergesNamedLists: a pod patch's volumes, container mounts
// and env are added to what the pod already has, merged by name (by
// mountPath for mounts) as Kubernetes' strategic merge patch merges a pod
// spec, so a patch that adds a shared volume keeps the scripts' ConfigMap
// volume and the container's command; lists without a merge key
// (tolerations) are replaced, as in a JSON merge patch.
func TestPodPatchMergesNamedLists(t *testing.T) {
	patch := map[string]any{
		"volumes": []any{map[string]any{"name": "ckpt", "hostPath": map[string]any{"path": "/srv/ckpt"}}},
		"containers": []any{map[string]any{"name": container,
			"volumeMounts": []any{map[string]any{"name": "ckpt", "mountPath": "/ckpt"}},
			"env":          []any{map[string]any{"name": "PIPETTE_RJOB", "value": "patched"}, map[string]any{"name": "EXTRA", "value": "1"}}}},
		"tolerations": []any{map[string]any{"key": "x", "operator": "Exists"}},
	}
	j, islands := exampleJob(t, nil, nil)
	m, err := Render(j, islands, Options{Image: "train:1", PodPatch: patch})
	if err != nil {
		t.Fatal(err)
	}
	spec := m.Objects[2]["spec"].(Object)["replicatedJobs"].([]any)[0].(Object)["template"].(Object)["spec"].(Object)["template"].(Object)["spec"].(Object)
	var vols []string
	for _, v := range spec["volumes"].([]any) {
		vols = append(vols, v.(Object)["name"].(string))
	}
	if want := []string{"pipette-launch", "ckpt"}; !slices.Equal(vols, want) {
		t.Errorf("volumes %v, want %v", vols, want)
	}
	cs := spec["containers"].([]any)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want the one, patched", len(cs))
	}
	c := cs[0].(Object)
	if c["command"] == nil || c["image"] != "train:1" {
		t.Errorf("the patch replaced the container: %v", c)
	}
	var mounts []string
	for _, v := range c["volumeMounts"].([]any) {
		mounts = append(mounts, v.(Object)["mountPath"].(string))
	}
	if want := []string{mountDir, "/ckpt"}; !slices.Equal(mounts, want) {
		t.Errorf("mounts %v, want %v", mounts, want)
	}
	env := map[string]any{}
	for _, e := range c["env"].([]any) {
		env[e.(Object)["name"].(string)] = e.(Object)["value"]
	}
	if env["PIPETTE_RJOB"] != "patched" || env["EXTRA"] != "1" || len(env) != 3 {
		t.Errorf("env %v: want PIPETTE_RJOB patched, EXTRA added, PIPETTE_INDEX kept", env)
	}
	if tol := spec["tolerations"].([]any); len(tol) != 1 {
		t.Errorf("tolerations %v: want the patch's", tol)
	}
}

// A pod's terminationGracePeriodSeconds covers its host script's grace
// (run's --stop-grace under run, else what the scripts were written with)
// and a margin, so the kubelet never kills ranks the script is still giving
// time; a user's patch stands, and the launch waits for what the pods got.
func TestPodGraceCoversTheStopGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		jobGrace int
		control  *job.Control
		patch    map[string]any
		want     int
	}{
		{name: "torchrun's default", want: 45},
		{name: "scripts written with 100 s", jobGrace: 100, want: 115},
		{name: "run's --stop-grace 90s", jobGrace: 30, control: &job.Control{Tag: "t", Grace: 90}, want: 105},
		{name: "a patch", control: &job.Control{Tag: "t", Grace: 90}, patch: map[string]any{"terminationGracePeriodSeconds": 600.0}, want: 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, islands := exampleJob(t, nil, nil)
			j.StopGrace = tc.jobGrace
			m, err := Render(j, islands, Options{Image: "train:1", Control: tc.control, PodPatch: tc.patch})
			if err != nil {
				t.Fatal(err)
			}
			spec := m.Objects[2]["spec"].(Object)["replicatedJobs"].([]any)[0].(Object)["template"].(Object)["spec"].(Object)["template"].(Object)["spec"].(Object)
			if got := podGraceSeconds(spec); got != tc.want || m.PodGraceSeconds != tc.want {
				t.Errorf("terminationGracePeriodSeconds %v, Manifests.PodGraceSeconds %d; want %d for both", spec["terminationGracePeriodSeconds"], m.PodGraceSeconds, tc.want)
			}
		})
	}
}
