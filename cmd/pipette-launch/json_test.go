package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// megatronLine is a Megatron-LM pretrain_gpt.py line (tiny shape) for
// --dry-run on the embedded example cluster.
var megatronLine = []string{"pretrain_gpt.py", "--num-layers", "2", "--hidden-size", "256", "--num-attention-heads", "4",
	"--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "8",
	"--vocab-size", "1024", "--bf16"}

type dryRunJSON struct {
	Summary string `json:"summary"`
	Hosts   []struct {
		Name     string `json:"name"`
		Address  string `json:"address"`
		NodeRank int    `json:"node_rank"`
		Ranks    []struct {
			Rank      int      `json:"rank"`
			LocalRank int      `json:"local_rank"`
			Argv      []string `json:"argv"`
			Env       []struct {
				Name, Value string
			} `json:"env"`
		} `json:"ranks"`
	} `json:"hosts"`
	Files []struct {
		Path    string `json:"path"`
		Mode    uint32 `json:"mode"`
		Content string `json:"content"`
	} `json:"files"`
	Plan *struct {
		TP int `json:"tp"`
		PP int `json:"pp"`
		DP int `json:"dp"`
	} `json:"plan"`
}

func runAppBuffers(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runApp(append([]string{"pipette-launch"}, args...), &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// --dry-run --json prints one JSON object with every rank, secrets masked
// as the text form masks them, and the plan the ranks' arguments follow.
func TestDryRunJSON(t *testing.T) {
	secrets := []string{"--env", "HF_TOKEN=hf_s3cr3t", "--env", "WANDB_API_KEY=wandb_s3cr3t", "--env", "MY_VISIBLE=plain"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"bare form", append(append([]string{"--dry-run", "--json", "--no-check-script"}, secrets...), megatronLine...)},
		{"run with value flags before --json", append(append([]string{"run", "--cluster", "../../examples/cluster.yaml", "--dry-run", "--no-check-script"}, secrets...), append([]string{"--json"}, megatronLine...)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAppBuffers(tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var got dryRunJSON
			dec := json.NewDecoder(strings.NewReader(stdout))
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if dec.More() {
				t.Fatalf("stdout holds more than one JSON object:\n%s", stdout)
			}
			if !strings.HasPrefix(got.Summary, "plan 1 of") || got.Plan == nil || got.Plan.TP < 1 || len(got.Hosts) == 0 {
				t.Fatalf("summary %q, plan %+v, %d hosts", got.Summary, got.Plan, len(got.Hosts))
			}
			if strings.Contains(stdout, "s3cr3t") {
				t.Fatalf("a secret reached stdout:\n%s", stdout)
			}
			ranks := 0
			for i, h := range got.Hosts {
				if h.NodeRank != i || h.Name == "" || h.Address == "" {
					t.Errorf("host %d: %+v", i, h)
				}
				for _, r := range h.Ranks {
					ranks++
					env := map[string]string{}
					for _, e := range r.Env {
						env[e.Name] = e.Value
					}
					if env["HF_TOKEN"] != "****" || env["WANDB_API_KEY"] != "****" || env["MY_VISIBLE"] != "plain" {
						t.Fatalf("rank %d env: HF_TOKEN=%q WANDB_API_KEY=%q MY_VISIBLE=%q", r.Rank, env["HF_TOKEN"], env["WANDB_API_KEY"], env["MY_VISIBLE"])
					}
					if env["RANK"] != itoa(r.Rank) || env["LOCAL_RANK"] != itoa(r.LocalRank) {
						t.Fatalf("rank %d: RANK=%q LOCAL_RANK=%q", r.Rank, env["RANK"], env["LOCAL_RANK"])
					}
					i := slices.Index(r.Argv, "--tensor-model-parallel-size")
					if i < 0 || r.Argv[i+1] != itoa(got.Plan.TP) {
						t.Fatalf("rank %d argv %q does not follow the plan's TP %d", r.Rank, r.Argv, got.Plan.TP)
					}
				}
			}
			if ranks != got.Plan.TP*got.Plan.PP*got.Plan.DP {
				t.Errorf("%d ranks, plan TP*PP*DP = %d", ranks, got.Plan.TP*got.Plan.PP*got.Plan.DP)
			}
			// The text form masks the same way.
			textArgs := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return a == "--json" })
			code, text, stderr := runAppBuffers(textArgs...)
			if code != 0 || !strings.Contains(text, "HF_TOKEN=****") || strings.Contains(text, "s3cr3t") {
				t.Fatalf("text --dry-run: exit %d, masked %v: %s", code, strings.Contains(text, "HF_TOKEN=****"), stderr)
			}
		})
	}
}

func itoa(n int) string { return jsonInt(n) }

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// DeepSpeed jobs carry files (ds_config.json, hostfile): --json gives
// their content as text.
func TestDryRunJSONFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ds_config.json")
	if err := os.WriteFile(cfg, []byte(`{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}, "bf16": {"enabled": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAppBuffers("--dry-run", "--json", "--no-check-script", "--model", "gpt3-125m",
		"train.py", "--deepspeed", "--deepspeed_config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if len(got.Files) == 0 {
		t.Fatalf("no files in a DeepSpeed job:\n%s", stdout)
	}
	for _, f := range got.Files {
		if f.Path == "" || f.Mode == 0 || f.Content == "" {
			t.Errorf("file %+v", f)
		}
		if strings.HasSuffix(f.Path, ".json") && !json.Valid([]byte(f.Content)) {
			t.Errorf("%s is not JSON text: %q", f.Path, f.Content)
		}
	}
}

// With --json every error is one JSON object on stderr naming the flag or
// cluster-file field, with the exit code; without it, the text line.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	badCluster := filepath.Join(dir, "bad.yaml")
	b, err := os.ReadFile("../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(b), "gpus_per_host: 8", "gpus_per_host: 0", 1)
	if bad == string(b) {
		t.Fatal("examples/cluster.yaml has no gpus_per_host: 8 to break")
	}
	if err := os.WriteFile(badCluster, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		field     string
		inMessage string
	}{
		{"run --json without --dry-run", []string{"run", "--json", "--no-check-script", "train.py"}, 2, "--json", "--dry-run"},
		{"bare --json without --dry-run", []string{"--json", "--no-check-script", "train.py"}, 2, "--json", "--dry-run"},
		{"run bad flag value", []string{"--dry-run", "--json", "--master-port", "0", "train.py"}, 2, "--master-port", "1-65535"},
		{"run unknown flag", []string{"run", "--json", "--dry-runn", "train.py"}, 2, "", "dry-runn"},
		{"plan bad --tp", []string{"plan", "--json", "--model", "gpt3-13b", "--global-batch-size", "256", "--tp", "3"}, 2, "--tp", "--tp"},
		{"plan cluster field", []string{"plan", "--cluster", badCluster, "--json", "--model", "gpt3-13b", "--global-batch-size", "256"}, 2, "clusters[0].gpus_per_host", "gpus_per_host"},
		{"plan does not fit", []string{"plan", "--json", "--model", "gpt3-175b", "--global-batch-size", "64", "--no-offload"}, 3, "", "misses by"},
		{"sbatch --json", []string{"sbatch", "--json", "--no-check-script", "train.py"}, 2, "--json", "batch script"},
		{"probe bad --group", []string{"probe", "--json", "--hosts", "a", "--group", "rack"}, 2, "--group", "rack"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAppBuffers(tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q on an error", stdout)
			}
			var got struct {
				Error    string `json:"error"`
				Field    *string
				ExitCode *int `json:"exit_code"`
			}
			dec := json.NewDecoder(strings.NewReader(stderr))
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stderr is not a JSON error: %v\n%s", err, stderr)
			}
			if dec.More() {
				t.Fatalf("more than one JSON object on stderr:\n%s", stderr)
			}
			if got.Field == nil || *got.Field != tc.field || got.ExitCode == nil || *got.ExitCode != tc.code || !strings.Contains(got.Error, tc.inMessage) {
				t.Fatalf("got %s, want field %q exit_code %d and %q in the error", stderr, tc.field, tc.code, tc.inMessage)
			}
			// The same command without --json prints the text line.
			textArgs := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return a == "--json" })
			if _, _, text := runAppBuffers(textArgs...); strings.HasPrefix(strings.TrimSpace(text), "{") {
				t.Errorf("without --json stderr is JSON: %s", text)
			}
		})
	}
}

// --json after the script is the script's own flag: errors stay text.
func TestWantsJSON(t *testing.T) {
	app := newApp(&IOStreams{})
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"plan", "--json"}, true},
		{[]string{"plan", "--model", "x", "--json=true"}, true},
		{[]string{"plan", "--json=false"}, false},
		{[]string{"--dry-run", "--json", "train.py"}, true},
		{[]string{"run", "--cluster", "c.yaml", "-json", "train.py"}, true},
		{[]string{"run", "--dry-run", "train.py", "--json"}, false},
		{[]string{"--nproc-per-node", "8", "train.py", "--json"}, false},
		{[]string{"--master-port", "29500", "--", "--json"}, false},
		{[]string{"probe", "-o", "-", "--json"}, true},
	} {
		if got := wantsJSON(app, append([]string{"pipette-launch"}, tc.args...)); got != tc.want {
			t.Errorf("wantsJSON(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	code, _, stderr := runAppBuffers("--master-port", "0", "train.py", "--json")
	if code != 2 || strings.HasPrefix(stderr, "{") || !strings.Contains(stderr, "--master-port") {
		t.Fatalf("script's --json: exit %d, stderr %q; want the text error", code, stderr)
	}
}

func TestErrorField(t *testing.T) {
	for msg, want := range map[string]string{
		"pipette-launch: --master-port 0: want 1-65535":                                            "--master-port",
		"plan: --tp 3 does not divide 40 heads":                                                    "--tp",
		"-o: give the cluster file to write":                                                       "-o",
		"cluster c.yaml: cluster file: clusters[1].gpus_per_host (line 7, column 20): must be > 0": "clusters[1].gpus_per_host",
		"pipette-launch: megatron arguments: missing: --vocab-size":                                "",
		"probe: no hosts: give --hosts":                                                            "",
		"pipette-launch run: flag provided but not defined: -dry-runn (see pipette-launch)":        "",
	} {
		if got := errorField(msg); got != want {
			t.Errorf("errorField(%q) = %q, want %q", msg, got, want)
		}
	}
}

// probe --json: the probed hosts and the cluster file's text on stdout;
// the file is still written to -o, but not to stdout with -o -.
func TestProbeJSON(t *testing.T) {
	probes := []*probe.HostProbe{
		{Target: "gpu1", Hostname: "gpu1", Addr: "198.18.0.11", MemoryBytes: 512 << 30, CPUCores: 64,
			GPUs: []probe.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, BusID: "00000000:18:00.0"}},
			NICs: []probe.NIC{{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", RateGbitPerS: 100, State: "up", Active: true}}},
		{Target: "gpu2", Hostname: "gpu2", Addr: "198.18.0.12", MemoryBytes: 512 << 30, CPUCores: 64,
			GPUs: []probe.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, BusID: "00000000:18:00.0"}},
			NICs: []probe.NIC{{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", RateGbitPerS: 100, State: "up", Active: true}}},
	}
	f, _, err := probe.BuildClusterFile(probes, probe.ClusterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := clusterFileText(f)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cluster.yaml")
	for _, output := range []string{"-", file} {
		t.Run(output, func(t *testing.T) {
			var out, errOut bytes.Buffer
			opts := &ProbeOptions{IO: &IOStreams{Out: &out, ErrOut: &errOut}, Output: output, JSON: true}
			if err := printProbeJSON(opts, probes, data); err != nil {
				t.Fatal(err)
			}
			var got struct {
				Hosts []struct {
					Target string `json:"target"`
					Addr   string `json:"addr"`
					GPUs   []struct {
						Name string `json:"name"`
					} `json:"gpus"`
				} `json:"hosts"`
				ClusterFile string `json:"cluster_file"`
				Output      string `json:"output"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out.String())
			}
			if len(got.Hosts) != 2 || got.Hosts[1].Addr != "198.18.0.12" || len(got.Hosts[0].GPUs) != 1 {
				t.Fatalf("hosts %+v", got.Hosts)
			}
			cf, err := cluster.Parse([]byte(got.ClusterFile))
			if err != nil {
				t.Fatalf("cluster_file does not parse: %v\n%s", err, got.ClusterFile)
			}
			if len(cf.Clusters) != 1 || len(cf.Clusters[0].Hosts) != 2 || cf.Clusters[0].GPUsPerHost != 1 {
				t.Fatalf("cluster_file %+v", cf.Clusters)
			}
			written, err := os.ReadFile(file)
			switch {
			case output == "-" && (got.Output != "" || err == nil):
				t.Fatalf("-o -: output %q, file written: %v", got.Output, err == nil)
			case output == file && (got.Output != file || err != nil || string(written) != got.ClusterFile):
				t.Fatalf("-o FILE: output %q, read %v, same content %v", got.Output, err, string(written) == got.ClusterFile)
			}
		})
	}
}
