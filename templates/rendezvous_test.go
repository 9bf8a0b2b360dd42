package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// rankEnv is one rank's environment as a map.
func rankEnv(job *job.Job, rank int) map[string]string {
	for _, h := range job.Hosts {
		for _, r := range h.Ranks {
			if r.Rank == rank {
				m := map[string]string{}
				for _, e := range r.Env {
					m[e.Name] = e.Value
				}
				return m
			}
		}
	}
	return nil
}

// TestMasterAddrIsRankZerosHost: whatever the user's --master-addr says,
// MASTER_ADDR is the host that runs rank 0 (here the plan puts rank 0 on
// the second listed host, n2), the user's port stays, and one warning says
// so; a pinned --node-rank that contradicts it is an error.
func TestMasterAddrIsRankZerosHost(t *testing.T) {
	c := newTestCluster(islandDef{name: "eth", hosts: []string{"n1", "n2", "n3"}, gpus: 2, gpu: "L4", nics: ethNICs(25)})
	// Ranks on n2, then n3, then n1: rank 0 is on n2 (198.18.0.11).
	plan := search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 6, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 6}}
	plan.Placement = placeInOrder(c, []int{1, 2, 0}, 2, identity)
	single := newTestCluster(islandDef{name: "box", hosts: []string{"box"}, gpus: 2, gpu: "L4", nics: ethNICs(25)})
	singlePlan := search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 2}}
	singlePlan.Placement = placeInOrder(single, []int{0}, 2, identity)
	rv := &Rendezvous{Addr: "10.9.0.2", Ifnames: []string{"ens1", "ens2", "ens3"}}

	for _, tc := range []struct {
		name        string
		c           *cluster.Cluster
		plan        search.Plan
		opts        Options
		wantAddr    string
		wantWarning string // "" means no warning about the master
		wantErr     string
	}{
		{name: "none given", c: c, plan: plan, wantAddr: "198.18.0.11"},
		{name: "rank 0's host by name", c: c, plan: plan, opts: Options{MasterAddr: "n2"}, wantAddr: "n2"},
		{name: "another host of the job", c: c, plan: plan, opts: Options{MasterAddr: "n1", MasterPort: 6000}, wantAddr: "198.18.0.11",
			wantWarning: "master address n1 is host n1, but rank 0 runs on n2: MASTER_ADDR=198.18.0.11, port 6000 kept"},
		{name: "another host's address", c: c, plan: plan, opts: Options{MasterAddr: "198.18.0.10"}, wantAddr: "198.18.0.11",
			wantWarning: "is host n1, but rank 0 runs on n2"},
		{name: "localhost on a multi-host job", c: c, plan: plan, opts: Options{MasterAddr: "localhost"}, wantAddr: "198.18.0.11",
			wantWarning: "master address localhost is loopback, but the job spans hosts"},
		{name: "127.0.0.1 on a multi-host job", c: c, plan: plan, opts: Options{MasterAddr: "127.0.0.1"}, wantAddr: "198.18.0.11",
			wantWarning: "is loopback"},
		{name: "outside the job", c: c, plan: plan, opts: Options{MasterAddr: "login-node"}, wantAddr: "198.18.0.11",
			wantWarning: "master address login-node is not a host of this job"},
		{name: "pinned node rank contradicts", c: c, plan: plan, opts: Options{MasterAddr: "n1", NodeRankPinned: true},
			wantErr: "with --node-rank given"},
		{name: "pinned node rank agrees", c: c, plan: plan, opts: Options{MasterAddr: "n2", NodeRankPinned: true}, wantAddr: "n2"},
		{name: "probed address wins over names", c: c, plan: plan, opts: Options{Rendezvous: rv}, wantAddr: "10.9.0.2"},
		{name: "user's name for rank 0's host, probed", c: c, plan: plan, opts: Options{MasterAddr: "n2", Rendezvous: rv}, wantAddr: "10.9.0.2"},
		{name: "localhost on one host", c: single, plan: singlePlan, opts: Options{MasterAddr: "127.0.0.1"}, wantAddr: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Script = "train.py"
			job, err := Render(&tc.plan, tc.c, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for r := range len(tc.plan.Placement) {
				if got := rankEnv(job, r)["MASTER_ADDR"]; got != tc.wantAddr {
					t.Errorf("rank %d MASTER_ADDR=%s, want %s", r, got, tc.wantAddr)
				}
			}
			var masterWarnings []string
			for _, w := range job.Warnings {
				if strings.HasPrefix(w, "master address") {
					masterWarnings = append(masterWarnings, w)
				}
			}
			switch {
			case tc.wantWarning == "" && len(masterWarnings) > 0:
				t.Errorf("unexpected warnings %q", masterWarnings)
			case tc.wantWarning != "" && (len(masterWarnings) != 1 || !strings.Contains(masterWarnings[0], tc.wantWarning)):
				t.Errorf("warnings %q, want exactly one containing %q", masterWarnings, tc.wantWarning)
			}
		})
	}
}

// TestRendezvousIfnamePerHost: each host's ranks bind the interface the
// probe found towards rank 0, replacing the island's generic choice, as
// GLOO_SOCKET_IFNAME=name and NCCL_SOCKET_IFNAME==name (exact match).
func TestRendezvousIfnamePerHost(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
	}{
		{"probed cluster", newTestCluster(islandDef{name: "eth", hosts: []string{"n1", "n2"}, gpus: 2, gpu: "L4", nics: ethNICs(25)})},
		{"listed hosts, nothing probed", newTestCluster(islandDef{name: "hosts", hosts: []string{"n1", "n2"}, gpus: 2})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 4}}
			plan.Placement = placeInOrder(tc.c, []int{0, 1}, 2, identity)
			job, err := Render(&plan, tc.c, Options{Script: "train.py", Rendezvous: &Rendezvous{Addr: "10.0.0.1", Ifnames: []string{"ens5", "bond0"}}})
			if err != nil {
				t.Fatal(err)
			}
			for rank, want := range map[int]string{0: "ens5", 1: "ens5", 2: "bond0", 3: "bond0"} {
				env := rankEnv(job, rank)
				if env["GLOO_SOCKET_IFNAME"] != want || env["NCCL_SOCKET_IFNAME"] != "="+want || env["MASTER_ADDR"] != "10.0.0.1" {
					t.Errorf("rank %d: GLOO_SOCKET_IFNAME=%q NCCL_SOCKET_IFNAME=%q MASTER_ADDR=%q, want %s, =%s, 10.0.0.1",
						rank, env["GLOO_SOCKET_IFNAME"], env["NCCL_SOCKET_IFNAME"], env["MASTER_ADDR"], want, want)
				}
			}
		})
	}
}
