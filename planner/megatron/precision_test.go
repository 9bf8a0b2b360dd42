package megatron

import (
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Issue 22: a Megatron line without --bf16/--fp16 runs in fp32 (Megatron's
// params_dtype default), and was priced and sized as bf16.
func TestPrecisionFromMegatronArgs(t *testing.T) {
	base := "--num-layers 2 --hidden-size 512 --num-attention-heads 8 --seq-length 128 --vocab-size 1000"
	for _, c := range []struct {
		extra string
		want  gpu.Precision
	}{
		{"", gpu.PrecisionFP32},
		{"--bf16", gpu.PrecisionBF16},
		{"--fp16", gpu.PrecisionFP16},
		{"--bf16 --fp8-format hybrid", gpu.PrecisionFP8},
	} {
		_, fx, _, err := ModelFromArgs(strings.Fields(base + " " + c.extra))
		if err != nil {
			t.Fatal(err)
		}
		if fx.Precision != c.want {
			t.Errorf("%q: precision %q, want %q", c.extra, fx.Precision, c.want)
		}
	}
}

// Issue 22: --decoder-first/last-pipeline-num-layers give the split
// Megatron-Core builds (get_num_layers_to_build): the first and last ranks
// hold what the flags say, the others share the rest, each rank's layers
// split evenly over its virtual stages.
func TestUnevenStagesFromMegatronArgs(t *testing.T) {
	base := "--num-layers 30 --hidden-size 512 --num-attention-heads 8 --seq-length 128 --vocab-size 1000 --bf16 --pipeline-model-parallel-size 4 "
	for _, c := range []struct {
		extra string
		want  []int
		err   string
	}{
		{"", nil, ""},
		{"--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6", []int{6, 9, 9, 6}, ""},
		{"--decoder-last-pipeline-num-layers 3", []int{9, 9, 9, 3}, ""},
		{"--decoder-first-pipeline-num-layers 4 --decoder-last-pipeline-num-layers 4 --num-virtual-stages-per-pipeline-rank 2", nil, "virtual"},
		{"--decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 4 --num-virtual-stages-per-pipeline-rank 2", []int{1, 6, 6, 2, 1, 6, 6, 2}, ""},
		{"--decoder-first-pipeline-num-layers 5", nil, "divide evenly"},
	} {
		_, fx, _, err := ModelFromArgs(strings.Fields(base + c.extra))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err = %v, want one containing %q", c.extra, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.extra, err)
			continue
		}
		if !slices.Equal(fx.StageLayers, c.want) {
			t.Errorf("%q: stage layers %v, want %v", c.extra, fx.StageLayers, c.want)
		}
	}
}
