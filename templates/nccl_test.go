package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

func envOf(r job.RankJob) map[string]string {
	m := map[string]string{}
	for _, e := range r.Env {
		m[e.Name] = e.Value
	}
	return m
}

func dpPlan(c *cluster.Cluster, f parallel.Framework, hosts []int, per int) *search.Plan {
	p := &search.Plan{Framework: f, Config: parallel.Config{TP: 1, PP: 1, DP: len(hosts) * per, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: len(hosts) * per}}
	p.Placement = placeInOrder(c, hosts, per, identity)
	return p
}

func TestNCCLSettingsPerFabric(t *testing.T) {
	cases := []struct {
		name    string
		cluster *cluster.Cluster
		mode    fabric.Mode
		want    map[string]map[string]string // host -> var -> value ("" = must be absent)
		warning string
	}{
		{"ib single island", newTestCluster(islandDef{name: "ib", fabric: "f", hosts: []string{"a", "b"}, gpus: 2, nics: ibNICs()}), fabric.ModeAuto,
			map[string]map[string]string{"a": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eno1", "NCCL_IB_DISABLE": "", "GLOO_SOCKET_IFNAME": "eno1"}}, ""},
		{"roce gid", newTestCluster(islandDef{name: "r", fabric: "f", hosts: []string{"a", "b"}, gpus: 2, nics: rocenNICs()}), fabric.ModeAuto,
			map[string]map[string]string{"b": {"NCCL_IB_HCA": "=mlx5_2:1", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "=ens1f0"}}, ""},
		{"ethernet only warns", newTestCluster(islandDef{name: "e", hosts: []string{"a", "b"}, gpus: 2, nics: ethNICs(100)}), fabric.ModeAuto,
			map[string]map[string]string{"a": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "8", "NCCL_IB_HCA": ""}}, "no host of this job has an RDMA NIC"},
		{"forced sockets on ib", newTestCluster(islandDef{name: "ib", fabric: "f", hosts: []string{"a", "b"}, gpus: 2, nics: ibNICs()}), fabric.ModeSockets,
			map[string]map[string]string{"a": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eno1", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "8", "NCCL_IB_HCA": ""}}, ""},
		{"ib + ethernet islands fall back to sockets everywhere", twoIslandCluster(islandDef{name: "eth", hosts: []string{"e1"}, gpus: 4, nics: ethNICs(10)}), fabric.ModeAuto,
			map[string]map[string]string{"a01": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eno1", "NCCL_IB_HCA": ""}, "e1": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "4"}}, "without a shared RDMA fabric"},
		{"two ib islands on one fabric keep rdma", twoIslandCluster(islandDef{name: "ib2", fabric: "ib-a", hosts: []string{"c1"}, gpus: 4, nics: ibNICs()}), fabric.ModeAuto,
			map[string]map[string]string{"c1": {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_DISABLE": ""}}, ""},
		{"ib without device names leaves the HCA to NCCL", newTestCluster(islandDef{name: "ib", hosts: []string{"a", "b"}, gpus: 2, nics: []cluster.NICSpec{{Type: cluster.NICInfiniBand, Count: 1, RateGbitPerS: 200, Netdevs: []string{"ib0"}}}}), fabric.ModeAuto,
			map[string]map[string]string{"a": {"NCCL_IB_HCA": "", "NCCL_IB_DISABLE": "", "NCCL_SOCKET_IFNAME": "=ib0"}}, "NCCL_IB_HCA is left to NCCL's detection"},
		{"ethernet names unknown", twoIslandCluster(islandDef{name: "eth", hosts: []string{"e1"}, gpus: 4, nics: []cluster.NICSpec{{Type: cluster.NICEthernet, Count: 2, RateGbitPerS: 100}}}), fabric.ModeAuto,
			map[string]map[string]string{"e1": {"NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "", "NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "8"}}, "Ethernet interface names unknown"},
		{"no nic info sets nothing", newTestCluster(islandDef{name: "x", hosts: []string{"a"}, gpus: 2}), fabric.ModeAuto,
			map[string]map[string]string{"a": {"NCCL_IB_DISABLE": "", "NCCL_SOCKET_IFNAME": "", "NCCL_IB_HCA": ""}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hosts []int
			for i := range tc.cluster.Hosts {
				hosts = append(hosts, i)
			}
			per := tc.cluster.Hosts[0].GPUs
			if tc.cluster.Hosts[len(hosts)-1].GPUs < per {
				per = tc.cluster.Hosts[len(hosts)-1].GPUs
			}
			job, err := Render(dpPlan(tc.cluster, parallel.FrameworkTorch, hosts, per), tc.cluster, Options{Script: "train.py", NCCLMode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range job.Hosts {
				want, ok := tc.want[h.Name]
				if !ok {
					continue
				}
				for _, r := range h.Ranks {
					env := envOf(r)
					for k, v := range want {
						got, present := env[k]
						if v == "" && present {
							t.Errorf("%s rank %d: %s=%q should not be set", h.Name, r.Rank, k, got)
						} else if v != "" && got != v {
							t.Errorf("%s rank %d: %s=%q, want %q", h.Name, r.Rank, k, got, v)
						}
					}
				}
			}
			warnings := strings.Join(job.Warnings, "\n")
			if tc.warning == "" && warnings != "" {
				t.Errorf("unexpected warnings: %s", warnings)
			}
			if !strings.Contains(warnings, tc.warning) {
				t.Errorf("warnings %q do not contain %q", warnings, tc.warning)
			}
		})
	}
}

func TestNCCLErrors(t *testing.T) {
	ipoibOnly := []cluster.NICSpec{{Type: cluster.NICInfiniBand, Count: 1, RateGbitPerS: 200, Devices: []string{"mlx5_0:1"}, Netdevs: []string{"ib0"}}}
	ibEth := twoIslandCluster(islandDef{name: "eth", hosts: []string{"e1", "e2"}, gpus: 4, nics: ethNICs(10)})
	cases := []struct {
		name    string
		cluster *cluster.Cluster
		plan    *search.Plan
		mode    fabric.Mode
		want    string
	}{
		{"ipoib only across islands", newTestCluster(
			islandDef{name: "ib", fabric: "f1", hosts: []string{"a"}, gpus: 2, nics: ipoibOnly},
			islandDef{name: "eth", hosts: []string{"b"}, gpus: 2, nics: ethNICs(10)}), nil, fabric.ModeAuto, "has no Ethernet NIC"},
		{"per-group with dp across islands", ibEth, dpPlan(ibEth, parallel.FrameworkMegatron, []int{0, 1, 2, 3}, 4), fabric.ModePerGroup, "share no RDMA fabric"},
		{"per-group for deepspeed", ibEth, dpPlan(ibEth, parallel.FrameworkDeepSpeed, []int{0, 2}, 4), fabric.ModePerGroup, "needs Holmes' Megatron fork"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.plan
			if p == nil {
				p = dpPlan(tc.cluster, parallel.FrameworkTorch, []int{0, 1}, 2)
			}
			args := gpt24Args
			_, err := Render(p, tc.cluster, Options{Script: "pretrain_gpt.py", Args: args, NCCLMode: tc.mode})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Render = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestUserEnvironmentRules: the launching shell's variables with DeepSpeed's
// export prefixes (and OMP_, TORCH_, HF_, ...) reach every rank (torchrun's
// ranks inherit OMP_NUM_THREADS; remote ranks only get it forwarded);
// pipette-launch's per-host NCCL settings win over a forwarded value with a
// warning, and yield to an explicit --env one, with a warning too; rank
// identity is never replaced.
func TestUserEnvironmentRules(t *testing.T) {
	c := newTestCluster(islandDef{name: "e", hosts: []string{"a"}, gpus: 2, nics: ethNICs(10)})
	p := dpPlan(c, parallel.FrameworkTorch, []int{0}, 2)
	shell := []string{"OMP_NUM_THREADS=4", "TORCH_NCCL_ASYNC_ERROR_HANDLING=3", "NCCL_SOCKET_IFNAME==bond0", "SECRET_TOKEN=x",
		"PYTHONPATH=/opt/lib", "HF_HOME=/data/hf", "WANDB_API_KEY=k1", "MV2_X=1", "UCX_TLS=rc", "MLFLOW_TRACKING_URI=http://m", "RANK=7", "CUDA_VISIBLE_DEVICES=3"}
	j, err := Render(p, c, Options{Script: "t.py", Env: shell})
	if err != nil {
		t.Fatal(err)
	}
	env := envOf(j.Hosts[0].Ranks[0])
	for k, want := range map[string]string{"OMP_NUM_THREADS": "4", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "3", "NCCL_SOCKET_IFNAME": "=eth0",
		"PYTHONPATH": "/opt/lib", "HF_HOME": "/data/hf", "WANDB_API_KEY": "k1", "MV2_X": "1", "UCX_TLS": "rc", "MLFLOW_TRACKING_URI": "http://m", "RANK": "0"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"SECRET_TOKEN", "CUDA_VISIBLE_DEVICES"} {
		if _, ok := env[k]; ok {
			t.Errorf("%s was forwarded", k)
		}
	}
	warnings := strings.Join(j.Warnings, "\n")
	for _, w := range []string{"NCCL_SOCKET_IFNAME==bond0 from your environment is not used", "CUDA_VISIBLE_DEVICES from your environment is not forwarded"} {
		if !strings.Contains(warnings, w) {
			t.Errorf("warnings lack %q: %v", w, j.Warnings)
		}
	}
	// Explicit (--env, env files) beats forwarded and pipette-launch's own.
	j, err = Render(p, c, Options{Script: "t.py", Env: shell, ExplicitEnv: []job.EnvVar{{Name: "NCCL_SOCKET_IFNAME", Value: "=bond1"}, {Name: "HF_HOME", Value: "/x"}, {Name: "NEW", Value: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	env = envOf(j.Hosts[0].Ranks[0])
	if env["NCCL_SOCKET_IFNAME"] != "=bond1" || env["HF_HOME"] != "/x" || env["NEW"] != "1" {
		t.Errorf("explicit values not applied: %v", env)
	}
	if !strings.Contains(strings.Join(j.Warnings, "\n"), "NCCL_SOCKET_IFNAME==bond1 (--env or env file) replaces pipette-launch's per-host value") {
		t.Errorf("no warning about the replaced NCCL setting: %v", j.Warnings)
	}
	if err := CheckExplicitEnv([]job.EnvVar{{Name: "WORLD_SIZE", Value: "3"}}); err == nil || !strings.Contains(err.Error(), "WORLD_SIZE is set per rank") {
		t.Errorf("--env WORLD_SIZE: %v", err)
	}
	if err := CheckExplicitEnv([]job.EnvVar{{Name: "CUDA_VISIBLE_DEVICES", Value: "0,1"}, {Name: "A_B", Value: "x"}}); err != nil {
		t.Errorf("--env CUDA_VISIBLE_DEVICES (for hosts whose GPUs are unknown): %v", err)
	}
	one := dpPlan(c, parallel.FrameworkTorch, []int{0}, 1)
	j, _ = Render(one, c, Options{Script: "t.py"})
	if _, ok := envOf(j.Hosts[0].Ranks[0])["OMP_NUM_THREADS"]; ok {
		t.Errorf("OMP_NUM_THREADS set with one process per node")
	}
}

func TestRankOrderAndPlacementEnv(t *testing.T) {
	c := newTestCluster(islandDef{name: "e", hosts: []string{"a", "b"}, gpus: 4, gpu: "A100-SXM-80GB", nics: ethNICs(10)})
	p := &search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 6, CP: 1, MicroBatch: 1, GlobalBatch: 6}}
	// Rank 0 on host b; host a holds ranks 3..5 on GPUs 3,1,2.
	p.Placement = []search.RankPlacement{
		{Rank: 0, HostIndex: 1, LocalRank: 0, GPU: 0}, {Rank: 1, HostIndex: 1, LocalRank: 1, GPU: 1}, {Rank: 2, HostIndex: 1, LocalRank: 2, GPU: 2},
		{Rank: 3, HostIndex: 0, LocalRank: 0, GPU: 3}, {Rank: 5, HostIndex: 0, LocalRank: 2, GPU: 2}, {Rank: 4, HostIndex: 0, LocalRank: 1, GPU: 1},
	}
	job, err := Render(p, c, Options{Script: "t.py"})
	if err != nil {
		t.Fatal(err)
	}
	if job.Hosts[0].Name != "b" || job.Hosts[1].Name != "a" {
		t.Fatalf("node order = %s,%s; rank 0's host must be node 0", job.Hosts[0].Name, job.Hosts[1].Name)
	}
	a := job.Hosts[1]
	for i, r := range a.Ranks {
		env := envOf(r)
		if r.LocalRank != i || env["GROUP_RANK"] != "1" || env["CUDA_VISIBLE_DEVICES"] != "3,1,2" || env["MASTER_ADDR"] != c.Hosts[1].Address || env["LOCAL_WORLD_SIZE"] != "3" {
			t.Errorf("host a rank %d: %v", r.Rank, env)
		}
	}
	// Hosts known only by name keep their own CUDA_VISIBLE_DEVICES.
	unknown := newTestCluster(islandDef{name: "e", hosts: []string{"a", "b"}, gpus: 4})
	job, err = Render(p, unknown, Options{Script: "t.py"})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := envOf(job.Hosts[0].Ranks[0])["CUDA_VISIBLE_DEVICES"]; ok {
		t.Errorf("CUDA_VISIBLE_DEVICES=%s set for a host whose GPUs are unknown", v)
	}
	bad := *p
	bad.Placement = append([]search.RankPlacement{}, p.Placement...)
	bad.Placement[5].GPU = 3
	if _, err := Render(&bad, c, Options{Script: "t.py"}); err == nil || !strings.Contains(err.Error(), "holds two ranks") {
		t.Errorf("two ranks on one GPU: %v", err)
	}
}

func TestRenderRejectsOtherRankOrder(t *testing.T) {
	c := newTestCluster(islandDef{name: "e", hosts: []string{"a"}, gpus: 2, nics: ethNICs(10)})
	p := dpPlan(c, parallel.FrameworkMegatron, []int{0}, 2)
	_, err := Render(p, c, Options{Script: "pretrain_gpt.py", Args: append([]string{"--use-tp-pp-dp-mapping"}, gpt24Args...)})
	if err == nil || !strings.Contains(err.Error(), "drop the flag") {
		t.Errorf("Render = %v, want the rank-order flag rejected", err)
	}
}
