package search

import (
	"errors"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Each impossible constraint is named with the reason and the values that
// would work, instead of one generic "no configuration" message.
func TestConstraintErrorsExplain(t *testing.T) {
	c := testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 400}}, 0)
	llama := model.Model{Name: "llama-7b", NumLayers: 32, Hidden: 4096, Heads: 32, SeqLength: 4096, Vocab: 32000}
	yes := true
	cases := []struct {
		name string
		fw   parallel.Framework
		fx   parallel.Constraints
		want string
	}{
		{"tp", parallel.FrameworkMegatron, parallel.Constraints{TP: 3}, "--tp 3: attention heads 32 are not divisible by 3; TP sizes that divide them and fit a host: 1, 2, 4, 8"},
		// --tp 16 on 8-GPU hosts is planned across hosts (wider_search_test.go).
		{"micro-batch", parallel.FrameworkMegatron, parallel.Constraints{MicroBatch: 3}, "--micro-batch-size 3: the global batch 64 is not divisible by 3; micro-batch sizes that work: 1, 2, 4, 8"},
		{"pp", parallel.FrameworkMegatron, parallel.Constraints{PP: 41}, "--pp 41: more pipeline stages than the model's 32 layers; PP sizes that work: 1, 2, 4, 8, 16"},
		{"pp not dividing GPUs", parallel.FrameworkMegatron, parallel.Constraints{PP: 3}, "--pp 3: 3 does not divide the 16 GPUs (TP x PP x CP x DP must equal them); PP sizes that work: 1, 2, 4, 8, 16"},
		{"cp", parallel.FrameworkMegatron, parallel.Constraints{CP: 3}, "--cp 3: sequence length 4096 is not divisible by 2 x CP = 6 (Megatron splits each sequence into 2 x CP chunks); CP sizes that work: 1"},
		{"vpp without pp", parallel.FrameworkMegatron, parallel.Constraints{VPP: 3, PP: 1}, "--vpp 3: the interleaved schedule needs --pp > 1; virtual stages that work: 1, 2, 4, 8"},
		{"dp", parallel.FrameworkMegatron, parallel.Constraints{DP: 3}, "--dp 3: 3 does not divide the 16 GPUs (DP = GPUs / (TP x PP x CP)); DP sizes that work: 1, 2, 4, 8, 16"},
		{"together", parallel.FrameworkMegatron, parallel.Constraints{TP: 8, PP: 2, DP: 2}, "--tp 8 --pp 2 --dp 2: each is possible alone, but together no configuration of llama-7b on 16 GPUs with global batch 64 satisfies them"},
		{"distopt on deepspeed", parallel.FrameworkDeepSpeed, parallel.Constraints{DistributedOptimizer: &yes}, "--distributed-optimizer is Megatron-LM's; DeepSpeed shards optimizer state with ZeRO: use --zero-stage 1, 2 or 3"},
		{"cp on deepspeed", parallel.FrameworkDeepSpeed, parallel.Constraints{CP: 2}, "--cp 2: DeepSpeed plans have no context parallelism"},
		{"zero on megatron", parallel.FrameworkMegatron, parallel.Constraints{ZeroStage: 2}, "--zero-stage 2 is DeepSpeed's; Megatron-LM has no ZeRO stages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fx := tc.fx
			if fx.ZeroStage == 0 {
				fx.ZeroStage = -1
			}
			_, err := Search(c, llama, Options{Framework: tc.fw, GlobalBatch: 64, Fixed: fx, TopK: 1})
			var ce *ConstraintError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T), want a *ConstraintError", err, err)
			}
			if got := err.Error(); len(got) < len(tc.want) || got[:len(tc.want)] != tc.want {
				t.Fatalf("error\n %q\nwant it to start with\n %q", got, tc.want)
			}
		})
	}
}
