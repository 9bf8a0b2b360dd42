package megatron

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The checker's MoE rules, each from Megatron-Core (see checkMoE), and
// DeepSpeed's for Megatron-DeepSpeed's expert flags.
func TestCheckMegatronArgsMoERules(t *testing.T) {
	base := "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --micro-batch-size 1 --global-batch-size 256 "
	cases := []struct {
		args, want string
		world      int
	}{
		{"--num-experts 8 --expert-model-parallel-size 8", "", 64},
		{"--num-experts 8 --expert-model-parallel-size 16", "not divisible by --expert-model-parallel-size", 64},
		{"--num-experts 64 --expert-model-parallel-size 64 --tensor-model-parallel-size 2 --sequence-parallel", "expert tensor x expert model x pipeline", 64},
		{"--num-experts 8 --expert-model-parallel-size 8 --expert-tensor-parallel-size 1 --tensor-model-parallel-size 2", "needs --sequence-parallel", 64},
		{"--expert-model-parallel-size 2", "need --num-experts", 64},
		// Megatron-DeepSpeed's expert flags, by DeepSpeed's rules
		// (checkDeepSpeedMoE): EP spans TP ranks without --sequence-parallel.
		{"--deepspeed --num-experts 64 --moe-expert-parallel-size 8", "", 8},
		{"--deepspeed --num-experts 64 --moe-expert-parallel-size 8 --tensor-model-parallel-size 2", "", 16},
		{"--deepspeed --num-experts 64 --moe-expert-parallel-size 6", "--moe-expert-parallel-size 6 does not divide --num-experts 64", 48},
		{"--deepspeed --num-experts 64 --moe-expert-parallel-size 16", "does not divide the 8 ranks of a pipeline stage", 8},
		{"--deepspeed --num-experts 64 --moe-expert-parallel-size 8 --tensor-model-parallel-size 2 --enable-expert-tensor-parallelism", "does not divide the data-parallel size 4", 8},
		{"--deepspeed --num-experts 1 --moe-expert-parallel-size 16", "", 8}, // dense: DeepSpeed builds no MoE layer
	}
	for _, c := range cases {
		err := CheckArgs(strings.Fields(base+c.args), c.world)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestCheckMegatronArgsRejectsBadCombinations(t *testing.T) {
	base := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
		"--seq-length", "2048", "--micro-batch-size", "1", "--global-batch-size", "16"}
	cases := []struct {
		name  string
		extra []string
		world int
		want  string
	}{
		{"world not divisible", []string{"--tensor-model-parallel-size", "3"}, 8, "not divisible by tp*pp*cp"},
		{"heads vs tp", []string{"--tensor-model-parallel-size", "32"}, 32, "--num-attention-heads 16 is not divisible by tp 32"},
		{"query groups", []string{"--tensor-model-parallel-size", "4", "--group-query-attention", "--num-query-groups", "6"}, 8, "neither divides"},
		{"hidden vs heads", []string{"--hidden-size", "2050"}, 8, "--hidden-size 2050 is not divisible"},
		{"seq vs cp", []string{"--context-parallel-size", "2", "--seq-length", "2050"}, 8, "not divisible by 2*cp"},
		{"fp8 param gather without the distributed optimizer", []string{"--fp8-param-gather"}, 8, "--fp8-param-gather needs --use-distributed-optimizer"},
		{"max positions", []string{"--max-position-embeddings", "1024"}, 8, "--max-position-embeddings 1024 < --seq-length 2048"},
		{"layers vs pp", []string{"--pipeline-model-parallel-size", "5"}, 10, "--num-layers 24 is not divisible by pp 5"},
		{"two vpp flags", []string{"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2", "--num-layers-per-virtual-pipeline-stage", "3"}, 8, "at most one"},
		{"vpp without pp", []string{"--num-virtual-stages-per-pipeline-rank", "2"}, 8, "needs pp > 1"},
		{"vpp pp2 no overlap p2p", []string{"--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2", "--no-overlap-p2p-communication"}, 8, "needs pp > 2"},
		{"vpp micro-batches", []string{"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2", "--global-batch-size", "6"}, 8, "not a multiple of pp"},
		{"layers per virtual", []string{"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "5"}, 8, "not divisible by --num-layers-per-virtual"},
		{"first zero", []string{"--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "0"}, 8, "must be > 0"},
		{"first/last uneven rest", []string{"--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "5"}, 8, "do not divide evenly"},
		{"first vs vpp", []string{"--pipeline-model-parallel-size", "4", "--num-virtual-stages-per-pipeline-rank", "2", "--decoder-first-pipeline-num-layers", "3", "--global-batch-size", "32"}, 8, "divisible by the 2 virtual stages"},
		{"layout layer count", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*12|t*11L"}, 8, "has 23 decoder layers"},
		{"layout two E", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*12|Et*12L"}, 8, "exactly one E"},
		{"layout L not last", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*12L|t*12"}, 8, "exactly one L"},
		{"layout stages vs pp", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*8|t*8|t*8L"}, 8, "not a multiple of pp"},
		{"layout with first", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*12|t*12L", "--decoder-first-pipeline-num-layers", "12"}, 8, "cannot be combined"},
		{"layout bad paren", []string{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "E(t*12|t*12L"}, 8, "unbalanced"},
		{"global vs micro*dp", []string{"--global-batch-size", "12", "--micro-batch-size", "4"}, 8, "not divisible by micro-batch 4 * dp 8"},
		{"full without method", []string{"--recompute-granularity", "full"}, 8, "needs --recompute-method"},
		{"selective with method", []string{"--recompute-granularity", "selective", "--recompute-method", "uniform"}, 8, "takes no --recompute-method"},
		{"method without granularity", []string{"--recompute-method", "uniform", "--recompute-num-layers", "1"}, 8, "need --recompute-granularity full"},
		{"recompute-activations with full", []string{"--recompute-activations", "--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"}, 8, "contradicts --recompute-granularity full"},
		{"recompute-activations with method", []string{"--recompute-activations", "--recompute-method", "uniform"}, 8, "takes no --recompute-method"},
		{"param gather without distopt", []string{"--overlap-grad-reduce", "--overlap-param-gather"}, 8, "--overlap-param-gather needs"},
		{"cpu offload without precision-aware", []string{"--use-distributed-optimizer", "--optimizer-cpu-offload"}, 8, "needs --use-precision-aware-optimizer"},
		{"offload fraction", []string{"--use-distributed-optimizer", "--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--optimizer-offload-fraction", "1.5"}, 8, "outside 0..1"},
		{"bf16 and fp16", []string{"--bf16", "--fp16"}, 8, "both set"},
		{"not an int", []string{"--tensor-model-parallel-size=two"}, 8, "not an integer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckArgs(append(append([]string{}, base...), tc.extra...), tc.world)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckArgs(%v) = %v, want an error containing %q", tc.extra, err, tc.want)
			}
		})
	}
}

func TestCheckMegatronArgsAcceptsValidSplits(t *testing.T) {
	base := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048"}
	for _, extra := range [][]string{
		{"--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "5", "--global-batch-size", "8"},
		{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "E(t*6|)*3t*6L", "--global-batch-size", "8"},
		{"--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout", "Et*7,|t*6|t*6|t*5L", "--global-batch-size", "8"},
		{"--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3", "--global-batch-size", "8"},
		{"--pipeline-model-parallel-size", "2", "--decoder-first-pipeline-num-layers=14", "--decoder-last-pipeline-num-layers=10"},
	} {
		if err := CheckArgs(append(append([]string{}, base...), extra...), 4); err != nil {
			t.Errorf("%v: %v", extra, err)
		}
	}
}

// --tp-comm-overlap needs sequence parallelism (and so TP > 1), as
// Megatron-LM's arguments.py asserts; the planner's constraints and
// Validate refuse the same.
func TestTPCommOverlapNeedsSequenceParallel(t *testing.T) {
	base := "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 256 --tp-comm-overlap "
	cases := []struct{ args, want string }{
		{"--tensor-model-parallel-size 2 --sequence-parallel", ""},
		{"--tensor-model-parallel-size 2", "--tp-comm-overlap needs --sequence-parallel"},
		{"--tensor-model-parallel-size 1 --sequence-parallel", "--tp-comm-overlap needs --sequence-parallel"},
	}
	for _, c := range cases {
		err := CheckArgs(strings.Fields(base+c.args), 8)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckArgs %s: %v, want %q", c.args, err, c.want)
		}
	}
	m, fixed, _, err := ModelFromArgs(strings.Fields(base + "--vocab-size 32000 --tensor-model-parallel-size 2 --sequence-parallel"))
	if err != nil || !fixed.TPCommOverlap {
		t.Fatalf("constraints from a --tp-comm-overlap line: overlap %v, err %v", fixed.TPCommOverlap, err)
	}
	if _, _, _, err := ModelFromArgs(strings.Fields(base + "--vocab-size 32000 --tensor-model-parallel-size 2")); err == nil || !strings.Contains(err.Error(), "--sequence-parallel") {
		t.Fatalf("--tp-comm-overlap without --sequence-parallel read as constraints: %v", err)
	}
	cfg := parallel.Config{TP: 1, PP: 1, DP: 8, CP: 1, MicroBatch: 1, GlobalBatch: 256, NumMicroBatches: 32, Recompute: parallel.RecomputeNone, TPCommOverlap: true}
	if err := Validate(m, cfg, 8); err == nil || !strings.Contains(err.Error(), "--tp-comm-overlap") {
		t.Fatalf("Validate of a TP 1 config with --tp-comm-overlap: %v", err)
	}
	cfg.TP, cfg.DP, cfg.NumMicroBatches, cfg.SequenceParallel = 2, 4, 64, true
	if err := Validate(m, cfg, 8); err != nil {
		t.Fatalf("Validate of TP 2 + sequence parallel + --tp-comm-overlap: %v", err)
	}
}

// TestCheckDeepSpeedArgsLetsPipelineModuleSplit: Megatron-DeepSpeed's
// pipeline stages are a DeepSpeed PipelineModule, which splits any layer
// count, so PP 5 on 24 layers passes there while Megatron-LM refuses it;
// fewer layers than stages, and every other rule, still fail.
func TestCheckDeepSpeedArgsLetsPipelineModuleSplit(t *testing.T) {
	base := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
		"--seq-length", "2048", "--micro-batch-size", "1", "--global-batch-size", "16"}
	for _, c := range []struct {
		name          string
		extra         []string
		world         int
		megatron, mds string // "" passes
	}{
		{"PP 5 on 24 layers", []string{"--pipeline-model-parallel-size", "5"}, 10, "--num-layers 24 is not divisible by pp 5", ""},
		{"PP 7 on 24 layers", []string{"--pipeline-model-parallel-size", "7"}, 14, "--num-layers 24 is not divisible by pp 7", ""},
		{"fewer layers than stages", []string{"--pipeline-model-parallel-size", "8", "--num-layers", "6"}, 16, "is not divisible by pp 8", "--num-layers 6 is fewer than pp 8"},
		{"heads vs tp still", []string{"--tensor-model-parallel-size", "32"}, 32, "--num-attention-heads 16 is not divisible by tp 32", "--num-attention-heads 16 is not divisible by tp 32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			argv := append(append([]string{}, base...), c.extra...)
			for _, x := range []struct {
				name  string
				check func([]string, int) error
				want  string
			}{{"CheckArgs", CheckArgs, c.megatron}, {"CheckDeepSpeedArgs", CheckDeepSpeedArgs, c.mds}} {
				err := x.check(argv, c.world)
				if (x.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), x.want)) {
					t.Errorf("%s: %v, want %q", x.name, err, x.want)
				}
			}
		})
	}
}
