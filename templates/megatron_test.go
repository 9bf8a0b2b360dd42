package templates

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestEveryRenderedMegatronCombinationPassesItsChecks renders a grid of
// configs over 4 hosts x 8 GPUs and checks every rank's final argv and env
// with the Megatron start-up checks.
func TestEveryRenderedMegatronCombinationPassesItsChecks(t *testing.T) {
	hosts := []string{"n1", "n2", "n3", "n4"}
	c := newTestCluster(islandDef{name: "ib", fabric: "f", hosts: hosts, gpus: 8, gpu: "H100-SXM-80GB", nics: ibNICs()})
	args := []string{"--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32",
		"--group-query-attention", "--num-query-groups", "8", "--seq-length", "4096", "--max-position-embeddings", "4096", "--bf16"}
	rendered := 0
	for _, tp := range []int{1, 2, 4, 8} {
		for _, pp := range []int{1, 2, 4} {
			for _, cp := range []int{1, 2} {
				for _, vpp := range []int{1, 2} {
					for _, split := range []string{"even", "firstlast", "layout"} {
						for _, rec := range []parallel.Recompute{parallel.RecomputeNone, parallel.RecomputeSelective, parallel.RecomputeFull} {
							for _, opt := range []string{"plain", "distopt", "offload"} {
								cfg, ok := gridConfig(tp, pp, cp, vpp, split, rec, opt, 32, 32)
								if !ok {
									continue
								}
								p := &search.Plan{Framework: parallel.FrameworkMegatron, Config: cfg}
								per := 8
								nh := (cfg.WorldSize() + per - 1) / per
								p.Placement = placeInOrder(c, []int{0, 1, 2, 3}[:nh], per, identity)
								name := fmt.Sprintf("tp%d pp%d cp%d vpp%d %s %s %s", tp, pp, cp, vpp, split, rec, opt)
								job, err := Render(p, c, Options{Script: "pretrain_gpt.py", Args: args})
								if err != nil {
									t.Errorf("%s: Render: %v", name, err)
									continue
								}
								rendered++
								for _, h := range job.Hosts {
									for _, r := range h.Ranks {
										if err := checkRankForMegatron(r); err != nil {
											t.Errorf("%s: rank %d: %v", name, r.Rank, err)
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d combinations rendered and checked", rendered)
	if rendered < 100 {
		t.Fatalf("only %d combinations rendered; the grid is not exercising the renderer", rendered)
	}
}

// gridConfig builds one grid point for 32 GPUs, false when it is not a
// config the planner could produce.
func gridConfig(tp, pp, cp, vpp int, split string, rec parallel.Recompute, opt string, layers, gpus int) (parallel.Config, bool) {
	if tp*pp*cp > gpus || (vpp > 1 && pp == 1) || (split != "even" && pp == 1) {
		return parallel.Config{}, false
	}
	dp := gpus / (tp * pp * cp)
	stages := pp * vpp
	if layers%stages != 0 {
		return parallel.Config{}, false
	}
	sl := make([]int, stages)
	for i := range sl {
		sl[i] = layers / stages
	}
	switch split {
	case "firstlast":
		if vpp > 1 || pp < 2 {
			return parallel.Config{}, false
		}
		sl[0]--
		sl[stages-1]--
		sl[stages/2] += 2
		if pp > 2 {
			// keep the middle equal: move the two layers to every middle stage evenly
			sl = make([]int, stages)
			mid := (layers - 2*(layers/stages-1)) / (stages - 2)
			if (layers-2*(layers/stages-1))%(stages-2) != 0 {
				return parallel.Config{}, false
			}
			for i := range sl {
				sl[i] = mid
			}
			sl[0], sl[stages-1] = layers/stages-1, layers/stages-1
		}
	case "layout":
		sl[0]++
		sl[stages-1]--
	}
	mb := 1
	gb := dp * mb * pp * 2
	cfg := parallel.Config{TP: tp, PP: pp, DP: dp, CP: cp, VPP: vpp, MicroBatch: mb, GlobalBatch: gb,
		NumMicroBatches: gb / (mb * dp), SequenceParallel: tp > 1, Recompute: rec, StageLayers: sl}
	switch opt {
	case "distopt":
		cfg.DistributedOptimizer = true
	case "offload":
		cfg.DistributedOptimizer = true
		cfg.Offload.OptimizerFraction = 0.5
	}
	return cfg, true
}

// checkRankForMegatron checks a rendered rank the way Megatron would at
// start: its arguments (after `python -u script`) and the environment.
func checkRankForMegatron(r job.RankJob) error {
	env := map[string]string{}
	for _, e := range r.Env {
		env[e.Name] = e.Value
	}
	var world int
	fmt.Sscan(env["WORLD_SIZE"], &world)
	if err := megatron.CheckArgs(r.Argv[3:], world); err != nil {
		return err
	}
	args := megatron.Parse(r.Argv[3:])
	tp, _ := args.Int("--tensor-model-parallel-size", 1)
	cp, _ := args.Int("--context-parallel-size", 1)
	if (tp > 1 || cp > 1) && env["CUDA_DEVICE_MAX_CONNECTIONS"] != "1" {
		return fmt.Errorf("tp %d cp %d without CUDA_DEVICE_MAX_CONNECTIONS=1", tp, cp)
	}
	for _, f := range []string{"--tensor-model-parallel-size", "--micro-batch-size", "--global-batch-size"} {
		if n := countFlag(r.Argv, f); n != 1 {
			return fmt.Errorf("%s appears %d times", f, n)
		}
	}
	return nil
}

func countFlag(argv []string, f string) int {
	n := 0
	for _, a := range argv {
		if a == f || strings.HasPrefix(a, f+"=") {
			n++
		}
	}
	return n
}

func TestStageFlagsChoosesTheSimplestForm(t *testing.T) {
	cases := []struct {
		pp, vpp int
		stages  []int
		want    string
	}{
		{2, 1, []int{12, 12}, ""},
		{2, 2, []int{6, 6, 6, 6}, "--num-virtual-stages-per-pipeline-rank 2"},
		{2, 1, []int{26, 22}, "--decoder-first-pipeline-num-layers 26 --decoder-last-pipeline-num-layers 22"},
		{4, 1, []int{5, 7, 7, 5}, "--decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 5"},
		{4, 1, []int{4, 7, 7, 6}, "--decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 6"},
		{4, 1, []int{6, 6, 6, 5}, "--decoder-last-pipeline-num-layers 5"},
		{4, 1, []int{6, 7, 6, 5}, "--pipeline-model-parallel-layout Et*6|t*7|t*6|t*5L"},
		{2, 2, []int{7, 6, 6, 5}, "--pipeline-model-parallel-layout Et*7|t*6|t*6|t*5L"},
		{2, 1, []int{24, 0}, "--pipeline-model-parallel-layout Et*24|L"},
		// Issue 29: Llama 3.1 405B's 126 layers on PP 8 VP 8 as
		// Megatron-Bridge runs them, the embedding and the loss counted
		// as layers; uneven first/last ranks with virtual stages.
		{8, 8, llama405Stages(), "--num-virtual-stages-per-pipeline-rank 8 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"},
		{4, 2, []int{2, 3, 3, 2, 2, 3, 3, 2}, "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 4"},
	}
	for _, tc := range cases {
		total := 0
		for _, n := range tc.stages {
			total += n
		}
		got, err := stageFlags(parallel.Config{PP: tc.pp, VPP: tc.vpp, StageLayers: tc.stages}, total)
		if err != nil {
			t.Errorf("%v: %v", tc.stages, err)
			continue
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("stageFlags(%v) = %q, want %q", tc.stages, strings.Join(got, " "), tc.want)
		}
	}
}

func TestMergeMegatronArgs(t *testing.T) {
	planned := []string{"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "1", "--micro-batch-size", "2", "--global-batch-size", "64"}
	// The user's arguments stay exactly as given (spelling and order); only
	// the planned flags they do not say are appended.
	got, err := MergeMegatronArgs([]string{"--lr", "1e-4", "--tensor-model-parallel-size=2", "--micro-batch-size", "2", "--data-path", "x"}, planned)
	if err != nil {
		t.Fatal(err)
	}
	want := "--lr 1e-4 --tensor-model-parallel-size=2 --micro-batch-size 2 --data-path x --pipeline-model-parallel-size 1 --global-batch-size 64"
	if strings.Join(got, " ") != want {
		t.Errorf("merged = %q, want %q", strings.Join(got, " "), want)
	}
	for _, bad := range [][]string{
		{"--tensor-model-parallel-size", "4"},
		{"--use-distributed-optimizer"},
		{"--num-virtual-stages-per-pipeline-rank", "2"},
		{"--recompute-granularity", "full"},
	} {
		if _, err := MergeMegatronArgs(bad, planned); err == nil {
			t.Errorf("MergeMegatronArgs(%v) accepted a flag that contradicts the plan", bad)
		}
	}
	full := []string{"--tensor-model-parallel-size", "1", "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}
	got, err = MergeMegatronArgs([]string{"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "4", "--overlap-grad-reduce"}, full)
	if want := "--recompute-granularity full --recompute-method block --recompute-num-layers 4 --overlap-grad-reduce --tensor-model-parallel-size 1"; err != nil || strings.Join(got, " ") != want {
		t.Errorf("user's recompute method and overlap switch: got %q, %v; want %q", strings.Join(got, " "), err, want)
	}
	vpp := []string{"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "3"}
	got, err = MergeMegatronArgs([]string{"--num-layers", "24", "--num-layers-per-virtual-pipeline-stage", "4"}, vpp)
	if err != nil || strings.Join(got, " ") != "--num-layers 24 --num-layers-per-virtual-pipeline-stage 4 --pipeline-model-parallel-size 2" {
		t.Errorf("layers per virtual stage equal to the plan's split: %q, %v", got, err)
	}
	if _, err := MergeMegatronArgs([]string{"--num-layers", "24", "--num-layers-per-virtual-pipeline-stage", "6"}, vpp); err == nil {
		t.Errorf("a different virtual split was accepted")
	}
	if _, err := MergeMegatronArgs([]string{"--sequence-parallel"}, []string{"--tensor-model-parallel-size", "1"}); err != nil {
		t.Errorf("--sequence-parallel at TP=1 should be tolerated: %v", err)
	}
}

func TestUserStageLayersRoundTrips(t *testing.T) {
	base := []string{"--num-layers", "24", "--pipeline-model-parallel-size", "4"}
	cases := []struct {
		extra []string
		want  []int
		vpp   int
	}{
		{nil, nil, 1},
		{[]string{"--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "5"}, []int{3, 8, 8, 5}, 1},
		{[]string{"--decoder-first-pipeline-num-layers", "6", "--decoder-last-pipeline-num-layers", "2", "--num-virtual-stages-per-pipeline-rank", "2"}, []int{3, 4, 4, 1, 3, 4, 4, 1}, 2},
		{[]string{"--pipeline-model-parallel-layout", "Et*7|t*6|t*6|t*5L"}, []int{7, 6, 6, 5}, 1},
	}
	for _, tc := range cases {
		got, vpp, err := megatron.StageLayers(append(append([]string{}, base...), tc.extra...))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) || vpp != tc.vpp {
			t.Errorf("%v: got %v vpp %d (%v), want %v vpp %d", tc.extra, got, vpp, err, tc.want, tc.vpp)
			continue
		}
		if got == nil {
			continue
		}
		// Rendering the split again must give flags the checker accepts.
		flags, err := stageFlags(parallel.Config{PP: 4, VPP: vpp, StageLayers: got}, 24)
		if err != nil {
			t.Fatal(err)
		}
		if err := megatron.CheckArgs(append(append([]string{}, base...), append(flags, "--global-batch-size", "8")...), 4); err != nil {
			t.Errorf("%v re-rendered as %v: %v", tc.extra, flags, err)
		}
	}
}

// --recompute-activations is Megatron's alias for selective recompute: it
// agrees with a selective plan (and stays, the plan's spelling of it not
// added) and contradicts any other.
func TestMergeRecomputeActivations(t *testing.T) {
	user := []string{"--num-layers", "24", "--recompute-activations"}
	out, err := MergeMegatronArgs(user, []string{"--recompute-granularity", "selective"})
	if err != nil {
		t.Fatalf("selective plan: %v", err)
	}
	if got := strings.Join(out, " "); got != "--num-layers 24 --recompute-activations" {
		t.Errorf("merged args = %q, want the user's alone", got)
	}
	for _, planned := range [][]string{
		{"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"},
		{},
	} {
		if _, err := MergeMegatronArgs(user, planned); err == nil || !strings.Contains(err.Error(), "--recompute-activations") {
			t.Errorf("plan %v: err = %v, want a contradiction naming --recompute-activations", planned, err)
		}
	}
}

// A user's layer split in another spelling than the plan's: the user's
// flags stay, the plan's equivalent ones are not added.
func TestMergeKeepsTheUsersSplitSpelling(t *testing.T) {
	user := []string{"--num-layers", "24", "--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et*3|t*8|t*8|t*5L"}
	planned := []string{"--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "5"}
	got, err := MergeMegatronArgs(user, planned)
	if want := strings.Join(user, " ") + " --tensor-model-parallel-size 1"; err != nil || strings.Join(got, " ") != want {
		t.Errorf("got %q, %v; want %q", strings.Join(got, " "), err, want)
	}
	planned[5] = "4" // a different first stage
	planned[7] = "4"
	if _, err := MergeMegatronArgs(user, planned); err == nil || !strings.Contains(err.Error(), "--pipeline-model-parallel-layout") {
		t.Errorf("a different split: err %v, want one naming the user's layout", err)
	}
}

// llama405Stages is 126 layers over PP 8 x VP 8 virtual stages of 2, the
// first and the last holding one (the embedding and the loss take the
// other place).
func llama405Stages() []int {
	stages := make([]int, 64)
	for i := range stages {
		stages[i] = 2
	}
	stages[0], stages[63] = 1, 1
	return stages
}
