package templates

import (
	"bytes"
	"flag"
	"path/filepath"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/golden"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// checkGolden compares got with testdata/golden/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got, *update)
}

type renderCase struct {
	name    string
	cluster *cluster.Cluster
	plan    search.Plan
	opts    Options
}

func twoIslandCluster(second islandDef) *cluster.Cluster {
	return newTestCluster(
		islandDef{name: "ib-h100", fabric: "ib-a", hosts: []string{"a01", "a02"}, gpus: 4, gpu: "H100-SXM-80GB", nics: ibNICs()},
		second,
	)
}

func renderCases() []renderCase {
	ib := newTestCluster(islandDef{name: "ib", fabric: "ib-a", hosts: []string{"node01", "node02"}, gpus: 4, gpu: "A100-SXM-80GB", nics: ibNICs()})
	roce := newTestCluster(islandDef{name: "roce", fabric: "roce-b", hosts: []string{"r01", "r02"}, gpus: 4, gpu: "A100-PCIE-40GB", nics: rocenNICs()})
	ibRoce := twoIslandCluster(islandDef{name: "roce-a100", fabric: "roce-b", hosts: []string{"b01", "b02"}, gpus: 4, gpu: "A100-SXM-80GB", nics: rocenNICs()})
	ibEth := twoIslandCluster(islandDef{name: "eth-a100", hosts: []string{"e01", "e02"}, gpus: 4, gpu: "A100-SXM-80GB", nics: ethNICs(10)})
	eth := newTestCluster(islandDef{name: "eth", hosts: []string{"w1", "w2"}, gpus: 4, gpu: "L4", nics: ethNICs(25)})
	single := newTestCluster(islandDef{name: "box", hosts: []string{"box"}, gpus: 4, gpu: "A100-PCIE-40GB", nics: ethNICs(10)})

	gpt13b := []string{"--num-layers", "40", "--hidden-size", "5120", "--num-attention-heads", "40",
		"--seq-length", "2048", "--max-position-embeddings", "2048", "--bf16"}

	return []renderCase{
		{name: "megatron_ib_tp2_pp2", cluster: ib, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 2, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 2, GlobalBatch: 64, SequenceParallel: true,
			Recompute: parallel.RecomputeSelective, DistributedOptimizer: true}},
			opts: Options{Script: "pretrain_gpt.py", Args: append([]string{"--tensor-model-parallel-size", "2"}, gpt24Args...)}},
		{name: "megatron_two_cluster_uneven", cluster: ibRoce, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 4, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 128, SequenceParallel: true,
			Recompute: parallel.RecomputeFull, DistributedOptimizer: true, StageLayers: []int{26, 22}}},
			opts: Options{Script: "pretrain_gpt.py", Args: gpt48Args, Python: "/usr/bin/python3"}},
		{name: "megatron_two_cluster_per_group", cluster: ibRoce, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 4, PP: 2, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 128, SequenceParallel: true,
			Recompute: parallel.RecomputeFull, DistributedOptimizer: true, StageLayers: []int{26, 22}}},
			opts: Options{Script: "pretrain_gpt.py", Args: gpt48Args, NCCLMode: fabric.ModePerGroup}},
		{name: "megatron_mixed_ib_ethernet", cluster: ibEth, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 4, PP: 4, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32,
			Recompute: parallel.RecomputeNone, StageLayers: []int{14, 14, 10, 10}}},
			opts: Options{Script: "pretrain_gpt.py", Args: gpt48Args}},
		{name: "megatron_two_ib_islands_comm_config", cluster: twoIBIslands(recentStack), plan: *crossPipelinePlan(twoIBIslands(recentStack)),
			opts: Options{Script: "pretrain_gpt.py", Args: gpt24Args}},
		{name: "megatron_vpp_layout_cp", cluster: ib, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 1, PP: 2, DP: 2, CP: 2, VPP: 2, MicroBatch: 1, GlobalBatch: 16,
			Recompute: parallel.RecomputeNone, StageLayers: []int{7, 6, 6, 5}}},
			opts: Options{Script: "pretrain_gpt.py", Args: gpt24Args, MasterPort: 29600, Name: "vpp-run"}},
		{name: "megatron_offload_13b", cluster: single, plan: search.Plan{Framework: parallel.FrameworkMegatron, Config: parallel.Config{
			TP: 4, PP: 1, DP: 1, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, SequenceParallel: true,
			Recompute: parallel.RecomputeFull, DistributedOptimizer: true, Offload: parallel.Offload{OptimizerFraction: 0.75}}},
			opts: Options{Script: "pretrain_gpt.py", Args: gpt13b}},
		{name: "deepspeed_megatron_zero2_offload_13b", cluster: single, plan: search.Plan{Framework: parallel.FrameworkDeepSpeed, Config: parallel.Config{
			TP: 1, PP: 1, DP: 4, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 32, Recompute: parallel.RecomputeFull,
			ZeroStage: 2, Offload: parallel.Offload{OptimizerFraction: 1}}},
			opts: Options{Script: "pretrain_gpt.py", Args: append(append([]string{}, gpt13b...), "--deepspeed", "--zero-stage", "2")}},
		{name: "deepspeed_zero3_offload_params", cluster: roce, plan: search.Plan{Framework: parallel.FrameworkDeepSpeed, Config: parallel.Config{
			TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 2, GlobalBatch: 64, ZeroStage: 3,
			Offload: parallel.Offload{OptimizerFraction: 0.5, Params: true}}},
			opts: Options{Script: "train.py", Args: []string{"--epochs", "3", "--fp16"}, Env: []string{"NCCL_DEBUG=INFO", "HOME=/root", "OMP_NUM_THREADS=8"}}},
		{name: "torch_ethernet", cluster: eth, plan: search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{
			TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8}},
			opts: Options{Script: "train.py", Args: []string{"--epochs", "3"}, LogDir: "logs", WorkDir: "/srv/job dir"}},
		{name: "torch_module_gpu_order", cluster: ib, plan: search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{
			TP: 1, PP: 1, DP: 8, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 8}},
			opts: Options{Script: "mypkg.train", Module: true, Args: []string{"--config", "a b.yaml"}, MasterAddr: "10.1.2.3"}},
	}
}

// placed fills a case's placement: host-major in the cluster's host order,
// with the second host's GPUs reversed so CUDA_VISIBLE_DEVICES shows the
// local-rank order.
func placed(rc renderCase) *search.Plan {
	p := rc.plan
	per := rc.cluster.Hosts[0].GPUs
	var hosts []int
	for i := range rc.cluster.Hosts {
		hosts = append(hosts, i)
	}
	world := p.WorldSize()
	hosts = hosts[:(world+per-1)/per]
	p.Placement = placeInOrder(rc.cluster, hosts, per, identity)
	for i := range p.Placement {
		if p.Placement[i].HostIndex == 1 {
			p.Placement[i].GPU = per - 1 - p.Placement[i].LocalRank
		}
	}
	return &p
}

func TestRenderGolden(t *testing.T) {
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			job, err := Render(placed(rc), rc.cluster, rc.opts)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			var b bytes.Buffer
			if err := Describe(&b, job); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, rc.name+".txt", b.Bytes())
			// Scripts differ only in what the .txt already shows; two
			// cases cover the template (plain, and work/log directories).
			if rc.name == "megatron_two_cluster_uneven" || rc.name == "torch_ethernet" {
				checkGolden(t, rc.name+".host0.sh", []byte(job.Hosts[0].Script))
			}
		})
	}
}
