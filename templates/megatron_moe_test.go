package templates

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"

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
	if err := megatron.CheckArgs(merged, 64); err != nil {
		t.Errorf("rendered MoE plan fails the checker: %v", err)
	}
	cfg.EP, cfg.ETP = 0, 0
	if a, _ := MegatronPlanArgs(cfg, 32); strings.Contains(strings.Join(a, " "), "expert") {
		t.Errorf("dense plan renders expert flags: %q", a)
	}
}
