package templates

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/examples"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestSearchedPlansRenderAndPassChecks renders every plan the planner
// returns for the example clusters and checks each rank with Megatron's
// and DeepSpeed's start-up rules: the planner's output must always be
// expressible as a launch that starts.
func TestSearchedPlansRenderAndPassChecks(t *testing.T) {
	clusters := map[string][]byte{"default": examples.DefaultCluster, "two-clusters": mustRead(t, "../examples/two-clusters.yaml"), "small-offload": mustRead(t, "../examples/small-offload.yaml")}
	args := map[string][]string{
		"default":       {"--num-layers", "48", "--hidden-size", "6144", "--num-attention-heads", "48", "--seq-length", "4096", "--max-position-embeddings", "4096", "--vocab-size", "32000", "--bf16", "--swiglu"},
		"two-clusters":  {"--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8", "--ffn-hidden-size", "14336", "--swiglu", "--seq-length", "4096", "--max-position-embeddings", "8192", "--vocab-size", "128256", "--bf16"},
		"small-offload": {"--num-layers", "40", "--hidden-size", "5120", "--num-attention-heads", "40", "--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "50257", "--bf16"},
	}
	rendered, offloaded, unevenDS := 0, 0, 0
	for name, data := range clusters {
		f, err := cluster.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		m, fixed, _, err := megatron.ModelFromArgs(args[name])
		if err != nil {
			t.Fatal(err)
		}
		for _, fw := range []parallel.Framework{parallel.FrameworkMegatron, parallel.FrameworkDeepSpeed} {
			res, err := search.Search(c, m, search.Options{Framework: fw, GlobalBatch: 64, Fixed: fixed, TopK: 10, Seed: 1})
			if err != nil {
				t.Fatalf("%s %s: Search: %v", name, fw, err)
			}
			for i := range res.Plans {
				p := res.Plans[i]
				p.Framework = fw
				label := fmt.Sprintf("%s %s plan %d (TP%d PP%d DP%d CP%d VPP%d stages %v ZeRO%d offload %+v)", name, fw, i+1, p.TP, p.PP, p.DP, p.CP, p.VPP, p.StageLayers, p.ZeroStage, p.Offload)
				j, err := Render(&p, c, Options{Script: "pretrain_gpt.py", Args: args[name]})
				if err != nil {
					if fw == parallel.FrameworkDeepSpeed && p.VPP > 1 {
						continue // Megatron-DeepSpeed cannot express it; Render says so
					}
					t.Errorf("%s: Render: %v", label, err)
					continue
				}
				rendered++
				if p.UsesOffload() {
					offloaded++
				}
				if fw == parallel.FrameworkDeepSpeed && !allEqual(p.StageLayers) {
					unevenDS++
				}
				for _, h := range j.Hosts {
					for _, r := range h.Ranks {
						if err := checkSplitEnv(&p, r.Env, j); err != nil {
							t.Errorf("%s rank %d: %v", label, r.Rank, err)
						}
						argv := r.Argv
						if fw == parallel.FrameworkDeepSpeed {
							argv = append(argv[:3:3], argv[4:]...) // drop --local_rank=N
						}
						if err := checkRankForMegatron(job.RankJob{Env: r.Env, Argv: argv}); err != nil {
							t.Errorf("%s rank %d: %v", label, r.Rank, err)
						}
						if err := checkOffloadFlags(&p, argv); err != nil {
							t.Errorf("%s rank %d: %v", label, r.Rank, err)
						}
					}
				}
				for _, f := range j.Files {
					if f.Path == DSConfigFile {
						if err := CheckDSConfig(f.Content, p.DP, p.PP); err != nil {
							t.Errorf("%s: %v", label, err)
						}
						if err := checkDSOffload(&p, f.Content); err != nil {
							t.Errorf("%s: %v", label, err)
						}
					}
				}
			}
		}
	}
	t.Logf("%d searched plans rendered and checked, %d of them with offload, %d DeepSpeed ones with uneven stages", rendered, offloaded, unevenDS)
	if rendered == 0 || offloaded == 0 || unevenDS == 0 {
		t.Fatalf("%d searched plans rendered, %d with offload, %d DeepSpeed with uneven stages: want all three", rendered, offloaded, unevenDS)
	}
}

// checkSplitEnv: a DeepSpeed rank of a plan with uneven stages gets the
// split in PIPETTE_PIPELINE_LAYERS (what site/pipette_ds_partition.py
// reads), stage by stage, and the job's site shims first on PYTHONPATH;
// any other rank does not get the split.
func checkSplitEnv(p *search.Plan, env []job.EnvVar, j *job.Job) error {
	got, set, pythonPath := "", false, ""
	for _, e := range env {
		switch e.Name {
		case PipelineLayersEnv:
			got, set = e.Value, true
		case "PYTHONPATH":
			pythonPath = e.Value
		}
	}
	if p.Framework != parallel.FrameworkDeepSpeed || p.PP < 2 || allEqual(p.StageLayers) {
		if set {
			return fmt.Errorf("%s=%s on a plan with stages %v (%s)", PipelineLayersEnv, got, p.StageLayers, p.Framework)
		}
		return nil
	}
	want := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.StageLayers)), ","), "[]")
	if got != want {
		return fmt.Errorf("%s=%q (set %v), want %q for stages %v", PipelineLayersEnv, got, set, want, p.StageLayers)
	}
	site := j.FilesDir + "/" + SiteDir
	if pythonPath != site && !strings.HasPrefix(pythonPath, site+":") {
		return fmt.Errorf("PYTHONPATH=%q does not start with the job's %s", pythonPath, site)
	}
	for _, f := range []string{SiteDir + "/sitecustomize.py", SiteDir + "/pipette_ds_partition.py"} {
		if !slices.ContainsFunc(j.Files, func(jf job.File) bool { return jf.Path == f }) {
			return fmt.Errorf("the job has no %s", f)
		}
	}
	return nil
}

// checkOffloadFlags: a Megatron rank carries the optimizer-offload flags
// with their companions exactly when the plan offloads; a DeepSpeed rank
// asks Megatron-DeepSpeed for its CPU optimizer.
func checkOffloadFlags(p *search.Plan, argv []string) error {
	want := p.Offload.OptimizerFraction > 0
	flags := []string{"--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--optimizer-offload-fraction", "--overlap-cpu-optimizer-d2h-h2d"}
	if p.Framework == parallel.FrameworkDeepSpeed {
		flags = []string{"--cpu-optimizer"}
	}
	for _, f := range flags {
		if slices.Contains(argv, f) != want {
			return fmt.Errorf("offload %+v but %s present=%v", p.Offload, f, !want)
		}
	}
	if i := slices.Index(argv, "--optimizer-offload-fraction"); i >= 0 && argv[i+1] != strconv.FormatFloat(p.Offload.OptimizerFraction, 'g', -1, 64) {
		return fmt.Errorf("--optimizer-offload-fraction %s, plan %g", argv[i+1], p.Offload.OptimizerFraction)
	}
	return nil
}

// checkDSOffload: ds_config.json has offload_optimizer (and offload_param)
// on the CPU exactly when the plan offloads them.
func checkDSOffload(p *search.Plan, data []byte) error {
	var cfg struct {
		Zero struct {
			Opt   *struct{ Device string } `json:"offload_optimizer"`
			Param *struct{ Device string } `json:"offload_param"`
		} `json:"zero_optimization"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return err
	}
	opt, param := cfg.Zero.Opt != nil && cfg.Zero.Opt.Device == "cpu", cfg.Zero.Param != nil && cfg.Zero.Param.Device == "cpu"
	if opt != (p.Offload.OptimizerFraction > 0) || param != p.Offload.Params {
		return fmt.Errorf("offload %+v but ds_config offload_optimizer on cpu=%v, offload_param on cpu=%v", p.Offload, opt, param)
	}
	return nil
}

// TestMegatronDeepSpeedPPNotDividingLayers: a DeepSpeed plan of a
// Megatron-DeepSpeed script whose PP does not divide the layers (PP 7 on
// 24: the plan's split is 4/4/4/3/3/3/3) renders, the split in
// PIPETTE_PIPELINE_LAYERS for DeepSpeed's PipelineModule, no Megatron split
// flag (Megatron-DeepSpeed has none). The render used to refuse it ("24
// layers do not divide over 7 stages"), which a planned DeepSpeed job on
// an odd number of hosts could meet as its first plan.
func TestMegatronDeepSpeedPPNotDividingLayers(t *testing.T) {
	f, err := cluster.Parse([]byte("clusters:\n  - name: a100\n    hosts: n[1-7]\n    gpus_per_host: 8\n    gpu: {model: A100-80GB-SXM}\n" +
		"    intra_host: {type: nvlink, bandwidth_gbyte_per_s: 243}\n    nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "50257", "--bf16"}
	m, fixed, _, err := megatron.ModelFromArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	fixed.PP = 7
	res, err := search.Search(c, m, search.Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 64, Fixed: fixed, TopK: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	p.Framework = parallel.FrameworkDeepSpeed
	j, err := Render(&p, c, Options{Script: "pretrain_gpt.py", Args: args})
	if err != nil {
		t.Fatalf("PP 7 stages %v: %v", p.StageLayers, err)
	}
	r := j.Hosts[0].Ranks[0]
	if err := checkSplitEnv(&p, r.Env, j); err != nil {
		t.Error(err)
	}
	a := megatron.Parse(r.Argv)
	if a.Value("--pipeline-model-parallel-size") != "7" || a.Has("--pipeline-model-parallel-layout") || a.Has("--decoder-first-pipeline-num-layers") {
		t.Errorf("argv %v: want PP 7 and no Megatron split flag", r.Argv)
	}
}
