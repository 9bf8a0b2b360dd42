package templates

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"gopkg.in/yaml.v3"
)

// megatronKeys are the process-group keys parallel_state.py looks up
// (testdata/megatron_nccl_keys.txt, copied from Megatron-LM's source).
func megatronKeys(t *testing.T) []string {
	var keys []string
	for _, l := range strings.Split(string(mustRead(t, "testdata/megatron_nccl_keys.txt")), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	return keys
}

var recentStack = &cluster.SoftwareVersions{NCCL: "2.21.5", Torch: "2.4.0+cu121", MegatronCore: "0.12.0"}

// twoIBIslands: two InfiniBand islands on different fabrics, joined by
// Ethernet only, with the versions that allow one network per communicator.
func twoIBIslands(sw *cluster.SoftwareVersions) *cluster.Cluster {
	c := newTestCluster(
		islandDef{name: "ib-a", fabric: "fab-a", hosts: []string{"a01", "a02"}, gpus: 4, gpu: "H100-SXM-80GB", nics: ibNICs()},
		islandDef{name: "ib-b", fabric: "fab-b", hosts: []string{"b01", "b02"}, gpus: 4, gpu: "H100-SXM-80GB", nics: ibNICs()},
	)
	for i := range c.Islands {
		c.Islands[i].Spec.Software = sw
	}
	return c
}

// crossPipelinePlan: TP 4 inside hosts, DP 2 across the hosts of one
// island, PP 2 across the islands (stage 0 on ib-a, stage 1 on ib-b).
func crossPipelinePlan(c *cluster.Cluster) *search.Plan {
	p := &search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
		TP: 4, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, StageLayers: []int{12, 12}}}
	p.Placement = placeInOrder(c, []int{0, 1, 2, 3}, 4, identity)
	return p
}

func TestCommConfigTwoIBIslands(t *testing.T) {
	c := twoIBIslands(recentStack)
	j, err := Render(crossPipelinePlan(c), c, Options{Script: "pretrain_gpt.py", Args: gpt24Args})
	if err != nil {
		t.Fatal(err)
	}
	accepted := megatronKeys(t)
	want := map[string]string{"tp": "IB", "dp": "IB", "dp_cp": "IB", "tp_dp": "IB", "tp_dp_cp": "IB", "cp": "IB", "tp_cp": "IB",
		"pos_embd": "IB", "pp": "Socket", "embd": "Socket", "mp": "Socket", "tp_ep_pp": "Socket", "hcp": "Socket"}
	for _, island := range []string{"ib-a", "ib-b"} {
		path := "nccl_comm_" + island + ".yaml"
		i := slices.IndexFunc(j.Files, func(f job.File) bool { return f.Path == path })
		if i < 0 {
			t.Fatalf("no %s among the job's files", path)
		}
		var cfg map[string]map[string]string
		if err := yaml.Unmarshal(j.Files[i].Content, &cfg); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for key, v := range cfg {
			// parallel_state.get_nccl_options: only these keys are read, and
			// net_name.lower() must be 'ib' or 'socket'.
			if !slices.Contains(accepted, key) {
				t.Errorf("%s: key %q is not one Megatron-Core looks up", path, key)
			}
			if n := strings.ToLower(v["net_name"]); n != "ib" && n != "socket" || len(v) != 1 {
				t.Errorf("%s: %s = %v, want only net_name IB or socket", path, key, v)
			}
		}
		for _, key := range accepted {
			if _, ok := cfg[key]; !ok {
				t.Errorf("%s lacks %q: that group type would use NCCL's default network", path, key)
			}
		}
		for key, net := range want {
			if cfg[key]["net_name"] != net {
				t.Errorf("%s: %s net_name %q, want %q", path, key, cfg[key]["net_name"], net)
			}
		}
	}
	if !slices.ContainsFunc(j.Files, func(f job.File) bool { return f.Path == "pipette_site/sitecustomize.py" }) {
		t.Error("no world-group shim among the job's files")
	}
	for _, h := range j.Hosts {
		island := "ib-a"
		if strings.HasPrefix(h.Name, "b") {
			island = "ib-b"
		}
		for _, r := range h.Ranks {
			argv := strings.Join(r.Argv, " ")
			if !strings.Contains(argv, " --nccl-communicator-config-path "+j.FilesDir+"/nccl_comm_"+island+".yaml") {
				t.Errorf("rank %d argv lacks its island's config: %s", r.Rank, argv)
			}
			env := envOf(r)
			for name, v := range map[string]string{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eno1",
				"PIPETTE_NCCL_WORLD_NET": "Socket", "PYTHONPATH": j.FilesDir + "/pipette_site", "NCCL_IB_DISABLE": "", "NCCL_NET": ""} {
				if env[name] != v {
					t.Errorf("rank %d: %s=%q, want %q", r.Rank, name, env[name], v)
				}
			}
		}
	}
	if !slices.ContainsFunc(j.Warnings, func(w string) bool { return strings.Contains(w, "ib-a: tp IB, cp IB, dp IB, pp Socket") }) {
		t.Errorf("warnings do not say the transport per group type: %q", j.Warnings)
	}
}

// mixedDPCase: two IB islands on different fabrics with recent versions,
// and a plan whose DP group {0,1} stays on ib-a's fabric while DP group
// {2,3} crosses to ib-b.
func mixedDPCase() (*cluster.Cluster, *search.Plan) {
	mixed := newTestCluster(
		islandDef{name: "ib-a", fabric: "fab-a", hosts: []string{"a01", "a02", "a03"}, gpus: 1, gpu: "H100-SXM-80GB", nics: ibNICs()},
		islandDef{name: "ib-b", fabric: "fab-b", hosts: []string{"b01"}, gpus: 1, gpu: "H100-SXM-80GB", nics: ibNICs()},
	)
	for i := range mixed.Islands {
		mixed.Islands[i].Spec.Software = recentStack
	}
	p := &search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
		TP: 1, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8, StageLayers: []int{12, 12}}}
	p.Placement = placeInOrder(mixed, []int{0, 1, 2, 3}, 1, identity)
	return mixed, p
}

func TestCommConfigFallsBack(t *testing.T) {
	mixed, mixedPlan := mixedDPCase()
	old := twoIBIslands(&cluster.SoftwareVersions{NCCL: "2.18.3", Torch: "2.0.1", MegatronCore: "0.12.0"})
	unknown := twoIBIslands(nil)
	ok := twoIBIslands(recentStack)
	cases := []struct {
		name    string
		c       *cluster.Cluster
		p       *search.Plan
		opts    Options
		warning string
	}{
		{"mixed dp", mixed, mixedPlan, Options{}, `the "dp" group type mixes fabrics: on island ib-a`},
		{"old torch", old, crossPipelinePlan(old), Options{}, "torch 2.0.1 on ib-a (needs 2.1)"},
		{"unknown versions", unknown, crossPipelinePlan(unknown), Options{}, "versions unknown (NCCL on ib-a, torch on ib-a, Megatron-Core on ib-a"},
		{"user's own config", ok, crossPipelinePlan(ok), Options{Args: []string{"--nccl-communicator-config-path", "mine.yaml"}}, "your --nccl-communicator-config-path mine.yaml is kept"},
		{"NCCL_NET exported", ok, crossPipelinePlan(ok), Options{Env: []string{"NCCL_NET=IB"}}, "NCCL_NET=IB is in your environment"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Script = "pretrain_gpt.py"
			o.Args = append(slices.Clone(gpt24Args), o.Args...)
			j, err := Render(tc.p, tc.c, o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(j.Warnings, func(w string) bool {
				return strings.Contains(w, "every rank uses TCP sockets") && strings.Contains(w, tc.warning)
			}) {
				t.Errorf("no fallback warning with %q: %q", tc.warning, j.Warnings)
			}
			if slices.ContainsFunc(j.Files, func(f job.File) bool { return strings.HasPrefix(f.Path, "nccl_comm_") }) {
				t.Error("a communicator config was written although the job falls back")
			}
			for _, h := range j.Hosts {
				for _, r := range h.Ranks {
					if env := envOf(r); env["NCCL_IB_DISABLE"] != "1" || env["PIPETTE_NCCL_WORLD_NET"] != "" {
						t.Errorf("rank %d: NCCL_IB_DISABLE=%q PIPETTE_NCCL_WORLD_NET=%q, want sockets everywhere", r.Rank, env["NCCL_IB_DISABLE"], env["PIPETTE_NCCL_WORLD_NET"])
					}
					if slices.Contains(r.Argv, "--nccl-communicator-config-path") && tc.name != "user's own config" {
						t.Errorf("rank %d argv has a communicator config: %q", r.Rank, r.Argv)
					}
				}
			}
		})
	}
}

func TestOrthogonalGroupsMatchMegatron(t *testing.T) {
	// parallel_state.py's docstring example: TP 2, PP 4, 16 GPUs (DP 2).
	p := &search.Plan{Config: parallel.Config{TP: 2, PP: 4, DP: 2, CP: 1}}
	got := map[string][][]int{"dp": groupsOf("dp", p), "tp": groupsOf("tp", p), "pp": groupsOf("pp", p)}
	want := map[string][][]int{
		"dp": {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}},
		"tp": {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}},
		"pp": {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}},
	}
	for k, w := range want {
		if !slices.EqualFunc(got[k], w, slices.Equal[[]int]) {
			t.Errorf("%s groups %v, want %v", k, got[k], w)
		}
	}
	if e := groupsOf("embd", p); !slices.EqualFunc(e, [][]int{{0, 12}, {1, 13}, {2, 14}, {3, 15}}, slices.Equal[[]int]) {
		t.Errorf("embd groups %v", e)
	}
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		v    string
		min  []int
		less bool
		ok   bool
	}{
		{"2.17.1", minNCCL, false, true}, {"2.17.0", minNCCL, true, true}, {"2.4.0+cu121", minTorch, false, true},
		{"1.13.0a0", minTorch, true, true}, {"0.11.0rc0", minMegatronCore, false, true}, {"0.10.0", minMegatronCore, true, true},
		{"", minTorch, false, false}, {"unknown", minTorch, false, false},
	} {
		n, ok := cluster.ParseVersion(tc.v)
		if ok != tc.ok || ok && cluster.VersionLess(n, tc.min) != tc.less {
			t.Errorf("%q: %v %v less=%v", tc.v, n, ok, cluster.VersionLess(n, tc.min))
		}
	}
}

// IslandsFallbackAhead answers before planning only where every plan's
// IslandsFallback gives the same answer; the mixed-fabric case, where the
// plan's DP groups decide, is left to the plan ("").
func TestIslandsFallbackAhead(t *testing.T) {
	mixed, mixedPlan := mixedDPCase()
	old := twoIBIslands(&cluster.SoftwareVersions{NCCL: "2.18.3", Torch: "2.0.1", MegatronCore: "0.12.0"})
	unknown := twoIBIslands(nil)
	ok := twoIBIslands(recentStack)
	for _, tc := range []struct {
		name  string
		c     *cluster.Cluster
		p     *search.Plan
		opts  Options
		ahead string // "" when the plan decides
	}{
		{"versions recorded", ok, crossPipelinePlan(ok), Options{}, ""},
		{"mixed dp", mixed, mixedPlan, Options{}, ""},
		{"old torch", old, crossPipelinePlan(old), Options{}, "torch 2.0.1 on ib-a (needs 2.1)"},
		{"unknown versions", unknown, crossPipelinePlan(unknown), Options{}, "versions unknown (NCCL on ib-a"},
		{"NCCL_NET exported", ok, crossPipelinePlan(ok), Options{Env: []string{"NCCL_NET=IB"}}, "NCCL_NET=IB is in your environment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ahead := IslandsFallbackAhead(tc.c, parallel.FrameworkMegatron, tc.opts)
			if tc.ahead == "" && ahead != "" || !strings.Contains(ahead, tc.ahead) {
				t.Fatalf("ahead %q, want %q", ahead, tc.ahead)
			}
			if after := IslandsFallback(tc.c, tc.p, tc.opts); ahead != "" && after == "" {
				t.Errorf("ahead says every plan falls back (%q), the plan does not", ahead)
			}
		})
	}
	if why := IslandsFallbackAhead(ok, parallel.FrameworkDeepSpeed, Options{}); !strings.Contains(why, "Megatron-LM only") {
		t.Errorf("DeepSpeed: %q", why)
	}
}

// TestRenderNoScripts: NoScripts renders the same job (ranks, files,
// warnings) without the host scripts.
func TestRenderNoScripts(t *testing.T) {
	c := twoIBIslands(recentStack)
	o := Options{Script: "pretrain_gpt.py", Args: gpt24Args}
	full, err := Render(crossPipelinePlan(c), c, o)
	if err != nil {
		t.Fatal(err)
	}
	o.NoScripts = true
	ranks, err := Render(crossPipelinePlan(c), c, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range full.Hosts {
		if full.Hosts[i].Script == "" || ranks.Hosts[i].Script != "" {
			t.Fatalf("host %d: script %d bytes in full, %d with NoScripts; want some and none", i, len(full.Hosts[i].Script), len(ranks.Hosts[i].Script))
		}
		full.Hosts[i].Script = ""
	}
	if !reflect.DeepEqual(full, ranks) {
		t.Errorf("the jobs differ beyond their scripts")
	}
}
