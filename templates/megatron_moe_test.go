package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// An MoE plan renders its expert parallelism, and the result passes the
// checker; a dense plan renders none.
func TestMegatronPlanArgsRenderExpertParallelism(t *testing.T) {
	cfg := parallel.Config{TP: 2, PP: 2, DP: 16, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 256, NumMicroBatches: 16,
		SequenceParallel: true, EP: 8, ETP: 1, Recompute: parallel.RecomputeNone}
	a, err := MegatronPlanArgs(cfg, 32)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(a, " ")
	for _, want := range []string{"--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1",
		"--moe-token-dispatcher-type alltoall", "--moe-grouped-gemm"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in %s", want, got)
		}
	}
	user := strings.Fields("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 --num-experts 8 --moe-token-dispatcher-type allgather --bf16")
	merged, err := MergeMegatronArgs(user, a)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(merged, " "), "--moe-token-dispatcher-type"); n != 1 {
		t.Errorf("the user's dispatcher and the planned one both rendered (%d): %q", n, merged)
	}
	if err := CheckMegatronArgs(merged, 64); err != nil {
		t.Errorf("rendered MoE plan fails the checker: %v", err)
	}
	cfg.EP, cfg.ETP = 0, 0
	if a, _ := MegatronPlanArgs(cfg, 32); strings.Contains(strings.Join(a, " "), "expert") {
		t.Errorf("dense plan renders expert flags: %q", a)
	}
}

// The checker's MoE rules, each from Megatron-Core (see checkMoE).
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
	}
	for _, c := range cases {
		err := CheckMegatronArgs(strings.Fields(base+c.args), c.world)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.args, err, c.want)
		}
	}
}
