package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// dsPinCluster is 4 hosts of 4 A100s whose network's speed decides the
// DP of the first plan (the slower, the smaller).
func dsPinCluster(t testing.TB, dir string, nic string) string {
	return a100Cluster(t, dir, 4, 4, "A100-40GB-SXM", nic)
}

// a100Cluster writes a cluster file of one island: hosts n1..nHOSTS of
// gpus A100s (model) over NVLink, nic their network.
func a100Cluster(t testing.TB, dir string, hosts, gpus int, model, nic string) string {
	t.Helper()
	path := filepath.Join(dir, "cluster.yaml")
	data := fmt.Sprintf("clusters:\n  - name: a100\n    hosts: n[1-%d]\n    gpus_per_host: %d\n    gpu: {model: %s}\n", hosts, gpus, model) +
		"    intra_host: {type: nvlink, bandwidth_gbyte_per_s: 243}\n    nics: [" + nic + "]\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dsPinArgs is a planned Megatron-DeepSpeed job with the user's config,
// --nnodes 3:4.
func dsPinArgs(clusterFile, config string, extra ...string) []string {
	return dsPinArgsNodes("3:4", clusterFile, config, extra...)
}

// dsPinArgsNodes is dsPinArgs with --nnodes nnodes.
func dsPinArgsNodes(nnodes, clusterFile, config string, extra ...string) []string {
	return cmdtest.Cat([]string{"--nnodes", nnodes, "--cluster", clusterFile, "--framework", "deepspeed", "--no-check-script", "pretrain_gpt.py"},
		small24, []string{"--deepspeed", "--deepspeed_config", config}, extra)
}

const zero1Config = `{"train_batch_size": 96, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}`

// TestElasticDeepSpeedKeepsDP (issue 30): a planned DeepSpeed job whose
// ZeRO checkpoint loads only at the data-parallel size that saved it is
// planned again, after each host lost alone, with that DP pinned: on
// every GPU left when they divide by it, on fewer hosts (named idle, and
// why) when they do not, and when no layout keeps it the job stops saying
// why and what to do (a universal checkpoint), also when the hosts that
// keep it are fewer than --nnodes' MIN. A universal checkpoint (the
// config's load_universal, Megatron-DeepSpeed's --universal-checkpoint)
// is planned afresh. The dry run's lines and --json's elastic_after_losing
// say the same.
func TestElasticDeepSpeedKeepsDP(t *testing.T) {
	layout := regexp.MustCompile(`TP (\d+) PP (\d+) DP (\d+)`)
	cases := []struct {
		name, nic, config string
		nnodes            string // --nnodes; "": 3:4
		extra             []string
		firstDP           string // the first plan's DP on this cluster (the cost model's choice)
		keep              bool   // each restart keeps firstDP
		idle              bool   // ... on fewer hosts
		stops             string // each loss stops the job saying this
	}{
		{name: "every GPU", nic: "{type: ethernet, count: 1, rate_gbit_per_s: 50}", config: zero1Config, firstDP: "2", keep: true},
		{name: "fewer hosts", nic: "{type: ethernet, count: 1, rate_gbit_per_s: 100}", config: zero1Config, nnodes: "2:4", firstDP: "8", keep: true, idle: true},
		{name: "fewer hosts than MIN", nic: "{type: ethernet, count: 1, rate_gbit_per_s: 100}", config: zero1Config, firstDP: "8",
			stops: "fewer than --nnodes' MIN 3"},
		{name: "no layout", nic: "{type: infiniband, count: 4, rate_gbit_per_s: 400}", config: zero1Config, firstDP: "16",
			stops: "ZeRO stage 1: DeepSpeed v0.14.4 loads its checkpoint only at the data-parallel size that saved it (DP 16"},
		{name: "universal", nic: "{type: ethernet, count: 1, rate_gbit_per_s: 100}", firstDP: "8",
			config: `{"train_batch_size": 96, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`},
		{name: "--universal-checkpoint", nic: "{type: ethernet, count: 1, rate_gbit_per_s: 100}", config: zero1Config, extra: []string{"--universal-checkpoint"}, firstDP: "8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ds.json")
			if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			nnodes := c.nnodes
			if nnodes == "" {
				nnodes = "3:4"
			}
			args := dsPinArgsNodes(nnodes, dsPinCluster(t, dir, c.nic), cfg, c.extra...)
			code, out, errOut := runCLI(t, append([]string{"--dry-run"}, args...)...)
			first := layout.FindStringSubmatch(out)
			if code != 0 || first == nil || first[3] != c.firstDP {
				t.Fatalf("exit %d, first plan %v: want DP %s (the cost model chose another: pick another network speed)\n%s\n%s", code, first, c.firstDP, out, errOut)
			}
			lines := regexp.MustCompile(`(?m)^# (n\d) lost: .*$`).FindAllString(out, -1)
			if len(lines) != 4 {
				t.Fatalf("want a line for each of 4 losses, got %d\n%s", len(lines), out)
			}
			for _, l := range lines {
				m := layout.FindStringSubmatch(l)
				switch {
				case c.stops != "":
					if !strings.Contains(l, "no plan on ") || !strings.Contains(l, c.stops) || !strings.Contains(l, "no layout with DP "+c.firstDP+" fits the hosts left") ||
						!strings.Contains(l, `"load_universal": true`) || !strings.Contains(l, "--universal-checkpoint") {
						t.Errorf("%q: want the stop saying %q, that no layout keeps DP %s, and what to do", l, c.stops, c.firstDP)
					}
				case m == nil || !strings.Contains(l, " restarts on "):
					t.Errorf("%q: want a restart", l)
				case c.keep && (m[3] != c.firstDP || !strings.Contains(l, "DP "+c.firstDP+" kept: ")):
					t.Errorf("%q: want DP %s kept, and why", l, c.firstDP)
				case c.keep && c.idle != (strings.Contains(l, " idle, nothing is started there (no layout uses all 12 GPUs (--dp "+c.firstDP) &&
					strings.Contains(l, "the DP "+c.firstDP+" pinned leaves no layout on every GPU)")):
					t.Errorf("%q: want idle hosts named %v", l, c.idle)
				case !c.keep && (m[3] == c.firstDP || strings.Contains(l, " kept: ")):
					t.Errorf("%q: a universal checkpoint loads at any DP: want it planned afresh (the best plan on 12 GPUs has another DP than %s)", l, c.firstDP)
				}
			}
			code, js, errOut := runCLI(t, append([]string{"--dry-run", "--json"}, args...)...)
			var got struct {
				AfterLosing []lossView `json:"elastic_after_losing"`
			}
			if code != 0 || json.Unmarshal([]byte(js), &got) != nil || len(got.AfterLosing) != 4 {
				t.Fatalf("--json: exit %d, want 4 losses in elastic_after_losing\n%s\n%s", code, js, errOut)
			}
			for i, v := range got.AfterLosing {
				if (v.Stops != "") != (c.stops != "") || (v.Stops == "" && !strings.Contains(lines[i], v.Summary)) || (v.Stops != "" && !strings.Contains(lines[i], v.Stops)) {
					t.Errorf("--json %+v: not the text dry run's %q", v, lines[i])
				}
			}
		})
	}
}

// TestElasticDeepSpeedRestartKeepsDP: the loop's real restart after a
// host lost keeps a ZeRO-1 checkpoint's DP 8: on 2 of the 3 hosts left
// (12 GPUs do not divide by 8), the third idle, under --nnodes 2:4; under
// 3:4 that is fewer hosts than MIN, and where no layout keeps DP 16, the
// job stops after the first attempt, saying why.
func TestElasticDeepSpeedRestartKeepsDP(t *testing.T) {
	for _, c := range []struct {
		name, nic, nnodes string
		attempts          int
		want              string
	}{
		{"fewer hosts", "{type: ethernet, count: 1, rate_gbit_per_s: 100}", "2:4", 2, "DP 8 kept: "},
		{"fewer hosts than MIN", "{type: ethernet, count: 1, rate_gbit_per_s: 100}", "3:4", 1, "fewer than --nnodes' MIN 3"},
		{"no layout", "{type: infiniband, count: 4, rate_gbit_per_s: 400}", "3:4", 1, "no layout with DP 16 fits the hosts left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ds.json")
			if err := os.WriteFile(cfg, []byte(zero1Config), 0o644); err != nil {
				t.Fatal(err)
			}
			var jobs []*job.Job
			f := losesHostFirst("n2", &jobs)
			args := append([]string{"--max-restarts", "1"}, dsPinArgsNodes(c.nnodes, dsPinCluster(t, dir, c.nic), cfg)...)
			code, _, errOut := runCLIWith(t, f.adjust, args...)
			if len(jobs) != c.attempts || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d after %d attempts, want %d saying %q\n%s", code, len(jobs), c.attempts, c.want, errOut)
			}
			if c.attempts == 1 {
				if code != 1 {
					t.Errorf("exit %d: want 1, the job stopped\n%s", code, errOut)
				}
				return
			}
			var hosts []string
			for _, h := range jobs[1].Hosts {
				hosts = append(hosts, h.Name)
			}
			if code != 0 || ranks(jobs[1]) != 8 || fmt.Sprint(hosts) == "" || len(hosts) != 2 || strings.Contains(fmt.Sprint(hosts), "n2") {
				t.Errorf("exit %d, restart with %d ranks on %v: want 0, 8 ranks (DP 8, PP 1) on 2 of n1 n3 n4\n%s", code, ranks(jobs[1]), hosts, errOut)
			}
		})
	}
}

// losesHostFirst fakes an elastic job's launches (recorded in jobs): the
// first attempt reports host lost, later ones finish.
func losesHostFirst(host string, jobs *[]*job.Job) *fakes {
	return &fakes{probe: noProbe, launch: func(_ context.Context, j *job.Job, _ *Options) error {
		*jobs = append(*jobs, j)
		if len(*jobs) == 1 {
			return launch.NewHostLost(j.Name, host, "connection lost: nothing heard from the host for 3s", time.Now())
		}
		return nil
	}}
}
