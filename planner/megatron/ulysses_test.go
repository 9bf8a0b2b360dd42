package megatron

import (
	"strings"
	"testing"
)

// DeepSpeed-Ulysses ranks stand outside DP, as Megatron-DeepSpeed's
// validate_args takes them out: world = TP x PP x SP x DP.
func TestUlyssesRanksAreTakenOutOfDP(t *testing.T) {
	base := "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 32768 --max-position-embeddings 32768 --micro-batch-size 1 --deepspeed "
	cases := []struct {
		args  string
		world int
		want  string // "" = accepted
	}{
		// The Megatron-DeepSpeed example: 8 ranks, SP 4, so DP 2 and a batch of 2.
		{"--ds-sequence-parallel-size 4 --global-batch-size 2", 8, ""},
		{"--ds-sequence-parallel-size 4 --global-batch-size 2 --tensor-model-parallel-size 2", 16, ""},
		{"--ds-sequence-parallel-size 3 --global-batch-size 2", 8, "not divisible by tp 1 x pp 1 x --ds-sequence-parallel-size 3"},
		{"--ds-sequence-parallel-size 4 --global-batch-size 3", 8, "--global-batch-size 3 is not divisible by micro-batch 1 * dp 2"},
		{"--ds-sequence-parallel-size 0 --global-batch-size 2", 8, "must be >= 1"},
	}
	for _, c := range cases {
		err := CheckArgs(strings.Fields(base+c.args), c.world)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s on %d ranks: %v", c.args, c.world, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s on %d ranks: error %v, want %q", c.args, c.world, err, c.want)
		}
	}
}

func TestUlyssesConstraints(t *testing.T) {
	fixed, err := ConstraintsFromArgs(strings.Fields("--num-layers 24 --ds-sequence-parallel-size 4 --deepspeed"))
	if err != nil {
		t.Fatal(err)
	}
	if fixed.CP != 4 || !fixed.Ulysses {
		t.Errorf("CP %d Ulysses %v, want the 4 Ulysses ranks as CP 4 with Ulysses set", fixed.CP, fixed.Ulysses)
	}
	_, err = ConstraintsFromArgs(strings.Fields("--num-layers 24 --ds-sequence-parallel-size 4 --context-parallel-size 2"))
	if err == nil || !strings.Contains(err.Error(), "both split the sequence") {
		t.Errorf("Ulysses with context parallelism: error %v, want one naming both", err)
	}
}
