package megatron

import (
	"reflect"
	"testing"
)

// TestKeepModelParallel (issue 30): a legacy checkpoint's restart keeps
// the TP, PP and layer split it ran with, replacing the script's own.
func TestKeepModelParallel(t *testing.T) {
	args := []string{"--num-layers", "24", "--tensor-model-parallel-size", "4", "--ckpt-format", "torch", "--save", "/c"}
	ran := []string{"pretrain_gpt.py", "--num-layers", "24", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "4",
		"--pipeline-model-parallel-layout", "Et*6|t*6|t*6|t*6L", "--micro-batch-size", "1"}
	want := []string{"--num-layers", "24", "--ckpt-format", "torch", "--save", "/c", "--tensor-model-parallel-size", "2",
		"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et*6|t*6|t*6|t*6L"}
	if got := KeepModelParallel(args, ran); !reflect.DeepEqual(got, want) {
		t.Errorf("KeepModelParallel =\n%q\nwant\n%q", got, want)
	}
	if !LegacyCheckpoint(args) || LegacyCheckpoint([]string{"--ckpt-format", "torch_dist"}) || LegacyCheckpoint(nil) {
		t.Errorf("LegacyCheckpoint: only --ckpt-format torch is legacy (torch_dist is core_v0.19.0's default)")
	}
	if !Resumes([]string{"--load", "/c"}) || !Resumes([]string{"--save=/c"}) || Resumes([]string{"--num-layers", "2"}) {
		t.Errorf("Resumes: --load or --save")
	}
}

func TestChanges(t *testing.T) {
	a := []string{"--tensor-model-parallel-size", "2", "--use-distributed-optimizer", "--micro-batch-size", "1"}
	b := []string{"--tensor-model-parallel-size", "4", "--micro-batch-size", "1", "--sequence-parallel"}
	want := []string{"--tensor-model-parallel-size 2 -> 4", "--use-distributed-optimizer dropped", "--sequence-parallel added"}
	if got := Changes(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("Changes = %q, want %q", got, want)
	}
}
