package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clusterDoc is a valid one-island cluster file; cases replace parts of it.
const clusterDoc = `clusters:
  - name: a
    hosts: node[1-2]
    gpus_per_host: 8
    gpu: {model: H100}
    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 400}]
`

const modelDoc = `name: m
num_layers: 32
hidden_size: 4096
num_attention_heads: 32
seq_length: 4096
vocab_size: 32000
`

// Every hostile input of issue 10, through the CLI as a user types it: the
// exact message and exit code (2 bad input, 3 does not fit, 0 ok).
func TestHostileInputs(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cluster := func(name, old, new string) string {
		if !strings.Contains(clusterDoc, old) {
			t.Fatalf("%s: cluster lacks %q", name, old)
		}
		return file(name+".yaml", strings.Replace(clusterDoc, old, new, 1))
	}
	model := func(name, old, new string) string {
		return file(name+".yaml", strings.Replace(modelDoc, old, new, 1))
	}
	plan := func(extra ...string) []string {
		return append([]string{"plan", "--model", "llama2-7b", "--global-batch-size", "64"}, extra...)
	}
	dry := func(extra ...string) []string {
		return append(append([]string{"run", "--dry-run"}, extra...), "train.py")
	}
	cases := []struct {
		name string
		args []string
		code int
		want string // stderr, exactly (trimmed)
	}{
		// Limits.
		{"hostfile slots", dry("--hostfile", file("hf-slots", "w1 slots=99999999\n")), 2,
			`pipette-launch: hostfile ` + dir + `/hf-slots:1: bad entry "w1 slots=99999999": slots=99999999: want a number from 1 to 64 (GPUs per host)`},
		{"hosts range", dry("--hosts", "w[1-100000]", "--nproc-per-node", "8"), 2,
			`pipette-launch: host list "w[1-100000]": range "1-100000" names more than 16384 hosts (the limit of one job)`},
		{"nproc", dry("--hosts", "w1", "--nproc-per-node", "99999999"), 2,
			`pipette-launch: --nproc-per-node "99999999": want a number from 1 to 64 (ranks per host), gpu, auto or cpu`},
		{"cluster 20000 hosts", plan("--cluster", cluster("c20000", "node[1-2]", "node[1-20000]")), 2,
			`cluster ` + dir + `/c20000.yaml: cluster file: clusters[0].hosts (line 3, column 12): host list "node[1-20000]": range "1-20000" names more than 16384 hosts (the limit of one job)`},
		{"cluster product", plan("--cluster", cluster("cprod", "node[1-2]", "rack[1-1000]-node[1-1000]")), 2,
			`cluster ` + dir + `/cprod.yaml: cluster file: clusters[0].hosts (line 3, column 12): host list "rack[1-1000]-node[1-1000]" names more than 16384 hosts (the limit of one job)`},
		{"hosts product", dry("--hosts", "rack[1-1000]-node[1-1000]"), 2,
			`pipette-launch: host list "rack[1-1000]-node[1-1000]" names more than 16384 hosts (the limit of one job)`},
		{"gpus per host huge", plan("--cluster", cluster("cgpu", "gpus_per_host: 8", "gpus_per_host: 99999999999")), 2,
			`cluster ` + dir + `/cgpu.yaml: cluster file: clusters[0].gpus_per_host (line 4, column 20): 99999999999 is out of range; want an integer below 2^31`},
		{"gpus per host over limit", plan("--cluster", cluster("cgpu65", "gpus_per_host: 8", "gpus_per_host: 65")), 2,
			`cluster ` + dir + `/cgpu65.yaml: cluster file: clusters[0].gpus_per_host (line 4, column 20): must be 1..64, got 65`},
		// Precise input errors.
		{"fractional GPUs", plan("--cluster", cluster("cfrac", "gpus_per_host: 8", "gpus_per_host: 8.5")), 2,
			`cluster ` + dir + `/cfrac.yaml: cluster file: clusters[0].gpus_per_host (line 4, column 20): got 8.5 (not a whole number); want an integer`},
		{"fractional hidden", plan("--model", model("mfrac", "hidden_size: 4096", "hidden_size: 2048.7")), 2,
			`model ` + dir + `/mfrac.yaml: model file: hidden_size (line 3, column 14): got 2048.7 (not a whole number); want an integer`},
		{"quoted boolean", plan("--model", model("mbool", "vocab_size: 32000", "vocab_size: 32000\nswiglu: \"yes\"")), 2,
			`model ` + dir + `/mbool.yaml: model file: swiglu (line 7, column 9): got the string "yes"; want true or false (unquoted)`},
		{"typo field", plan("--cluster", cluster("ctypo", "gpus_per_host", "gpus_per_hosts")), 2,
			`cluster ` + dir + `/ctypo.yaml: cluster file: clusters[0].gpus_per_hosts (line 4, column 5): unknown field "gpus_per_hosts"; the fields here are name, hosts, gpus_per_host, gpu, intra_host, nics, fabric, host_memory_gib, cpu_cores, software, pcie_gen, host_memory_bandwidth_gbyte_per_s`},
		{"cluster a;b", plan("--cluster", cluster("csemi", "node[1-2]", "a;b")), 2,
			`cluster ` + dir + `/csemi.yaml: cluster file: clusters[0].hosts[0] (line 3, column 12): host "a;b": contains ';' at byte 1 (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"cluster $(id)", plan("--cluster", cluster("csubst", "node[1-2]", `["host$(id)"]`)), 2,
			`cluster ` + dir + `/csubst.yaml: cluster file: clusters[0].hosts[0] (line 3, column 13): host "host$(id)": contains '$' at byte 4 (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"cluster ssh option", plan("--cluster", cluster("copt", "node[1-2]", "[-oProxyCommand=x]")), 2,
			`cluster ` + dir + `/copt.yaml: cluster file: clusters[0].hosts[0] (line 3, column 13): host "-oProxyCommand=x": starts with '-', which ssh would read as an option (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"cluster ip; id", plan("--cluster", cluster("cip", "node[1-2]", `["1.2.3.4; id"]`)), 2,
			`cluster ` + dir + `/cip.yaml: cluster file: clusters[0].hosts[0] (line 3, column 13): host "1.2.3.4; id": contains ';' at byte 7 (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"hostfile control byte", dry("--hostfile", file("hf-ctl", "w\x01 slots=8\n")), 2,
			`pipette-launch: hostfile ` + dir + `/hf-ctl:1: bad entry "w\x01 slots=8": host "w\x01": contains '\x01' at byte 1 (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"user@@host", dry("--hosts", "user@@host"), 2,
			`pipette-launch: --hosts: host "user@@host": contains '@' at byte 0 (want a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address)`},
		{"host:", dry("--hosts", "host:"), 2,
			`pipette-launch: --hosts: host "host:": port "" is not a number from 1 to 65535`},
		// Constraint errors that explain.
		{"tp 3", plan("--tp", "3"), 2,
			`plan: --tp 3: attention heads 32 are not divisible by 3; TP sizes that divide them and fit a host: 1, 2, 4, 8`},
		{"micro-batch 3", plan("--micro-batch-size", "3"), 2,
			`plan: --micro-batch-size 3: the global batch 64 is not divisible by 3; micro-batch sizes that work: 1, 2, 4, 8, 16, 32`},
		{"pp 41", plan("--pp", "41"), 2,
			`plan: --pp 41: more pipeline stages than the model's 32 layers; PP sizes that work: 1, 2, 4, 8, 16, 32`},
		{"cp 3", plan("--cp", "3"), 2,
			`plan: --cp 3: sequence length 4096 is not divisible by 2 x CP = 6 (Megatron splits each sequence into 2 x CP chunks); CP sizes that work: 1`},
		{"vpp 3 pp 1", plan("--vpp", "3", "--pp", "1"), 2,
			`plan: --vpp 3: the interleaved schedule needs --pp > 1; virtual stages that work: 1, 2, 4, 8, 16`},
		{"distopt deepspeed", plan("--distributed-optimizer", "--framework", "deepspeed"), 2,
			`plan: --distributed-optimizer is Megatron-LM's; DeepSpeed shards optimizer state with ZeRO: use --zero-stage 1, 2 or 3`},
		{"zero-stage megatron", plan("--zero-stage", "2"), 2,
			`--zero-stage 2 is DeepSpeed's; Megatron-LM has no ZeRO stages: use --distributed-optimizer (ZeRO-1-like sharding) or --framework deepspeed`},
		{"top 0", plan("--top", "0"), 2, `--top 0: want at least 1 (plans to show)`},
		{"fanout 0", dry("--hosts", "a", "--fanout", "0"), 2, `pipette-launch: --fanout 0: want at least 1 (hosts contacted at once)`},
		{"run-id empty", dry("--hosts", "a", "--run-id", ""), 2, `pipette-launch: --run-id (or PET_RDZV_ID) "": want a non-empty job name (it becomes TORCHELASTIC_RUN_ID)`},
		{"local-ranks-filter", dry("--hosts", "a", "--local-ranks-filter", "99"), 2, `pipette-launch: --local-ranks-filter 99: local ranks of this job are 0..0`},
		{"quiet-ranks", dry("--hosts", "a", "--quiet-ranks", "5"), 2, `pipette-launch: --quiet-ranks 5: ranks of this job are 0..0`},
		// Does not fit: exit 3.
		{"no fit", []string{"plan", "--model", "gpt3-175b", "--global-batch-size", "64", "--no-offload", "--cluster", cluster("small", "node[1-2]", "node1")}, 3, "plan: "},
		// IPv6 with a port works.
		{"ipv6 with port", dry("--hosts", "[::1]:2222"), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			got := strings.TrimSpace(stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, got)
			}
			if tc.code == 3 {
				if !strings.HasPrefix(got, tc.want) || !strings.Contains(got, "misses by") {
					t.Fatalf("stderr %q, want a no-fit message", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("stderr\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
