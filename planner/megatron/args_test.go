package megatron

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

func TestModelFromMegatronArgsLlama70B(t *testing.T) {
	// The flags Megatron-LM's Llama-2 70B recipe uses, mixing both spellings.
	args := strings.Fields(`pretrain_gpt.py --num-layers 80 --hidden-size=8192 --num-attention-heads 64
		--group-query-attention --num-query-groups 8 --ffn-hidden-size 28672 --swiglu
		--seq-length 4096 --max-position-embeddings 4096 --vocab-size 32000
		--untie-embeddings-and-output-weights --tensor-model-parallel-size 8
		--pipeline-model-parallel-size=4 --num-layers-per-virtual-pipeline-stage 5
		--micro-batch-size 1 --global-batch-size 1024 --sequence-parallel
		--recompute-granularity selective --use-distributed-optimizer --bf16`)
	m, fixed, found, err := ModelFromArgs(args)
	if err != nil || !found {
		t.Fatalf("found=%v err=%v", found, err)
	}
	want := model.Model{Name: "megatron-args", NumLayers: 80, Hidden: 8192, Heads: 64, QueryGroups: 8, FFNHidden: 28672,
		SwiGLU: true, SeqLength: 4096, Vocab: 32000, MaxPositionEmbeddings: 4096, UntieEmbeddings: true}
	if m != want {
		t.Errorf("model:\n got %+v\nwant %+v", m, want)
	}
	p, _ := model.Preset("llama2-70b")
	if m.Parameters() != p.Parameters() {
		t.Errorf("parameters %d, preset %d", m.Parameters(), p.Parameters())
	}
	wantC := parallel.Constraints{TP: 8, PP: 4, VPP: 4, MicroBatch: 1, Recompute: parallel.RecomputeSelective, ZeroStage: -1,
		SequenceParallel: boolPtr(true), DistributedOptimizer: boolPtr(true), Precision: gpu.PrecisionBF16}
	if !reflect.DeepEqual(fixed, wantC) {
		t.Errorf("constraints:\n got %+v\nwant %+v", fixed, wantC)
	}
	micro, global, err := BatchArgs(args)
	if err != nil || micro != 1 || global != 1024 {
		t.Errorf("batch = %d, %d, %v", micro, global, err)
	}
}

func TestModelFromMegatronArgsDefaults(t *testing.T) {
	cases := []struct {
		name, args string
		check      func(model.Model) bool
	}{
		{"num-query-groups ignored without --group-query-attention",
			"--num-layers 2 --hidden-size 512 --num-attention-heads 8 --num-query-groups 2 --seq-length 128 --vocab-size 1000",
			func(m model.Model) bool { return m.Groups() == 8 }},
		{"SwiGLU default FFN is Megatron's 2/3*4h rounded to 64",
			"--num-layers 2 --hidden-size 4096 --num-attention-heads 32 --swiglu --seq-length 128 --vocab-size 1000",
			func(m model.Model) bool { return m.FFN() == 10880 }},
		{"GPT-2 tokenizer gives 50257 and positions default to seq",
			"--num-layers 2 --hidden-size 512 --num-attention-heads 8 --seq-length 1024 --tokenizer-type GPT2BPETokenizer",
			func(m model.Model) bool { return m.Vocab == 50257 && m.MaxPositionEmbeddings == 1024 }},
	}
	for _, c := range cases {
		m, _, found, err := ModelFromArgs(strings.Fields(c.args))
		if err != nil || !found || !c.check(m) {
			t.Errorf("%s: %+v found=%v err=%v", c.name, m, found, err)
		}
	}
}

func TestModelFromMegatronArgsErrors(t *testing.T) {
	cases := []struct{ args, want string }{
		{"--num-layers 24 --hidden-size 1024", "missing: --num-attention-heads, --seq-length, --vocab-size"},
		{"--num-layers x --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --vocab-size 5", `--num-layers: want a positive integer, got "x"`},
		{"--num-layers 24 --hidden-size 1000 --num-attention-heads 16 --seq-length 2048 --vocab-size 5", "hidden_size: 1000 is not divisible by num_attention_heads 16"},
		{"--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --vocab-size 5 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4", "24 layers do not split into 4 stages of 4 layers"},
		{"--num-layers 24 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --vocab-size 5 --recompute-granularity some", `--recompute-granularity: want full or selective, got "some"`},
	}
	for _, c := range cases {
		_, _, found, err := ModelFromArgs(strings.Fields(c.args))
		if !found || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: found=%v err=%v, want %q", c.args, found, err, c.want)
		}
	}
	_, _, found, err := ModelFromArgs([]string{"train.py", "--lr", "1e-4", "--bf16"})
	if found || err != nil {
		t.Errorf("no shape flags: found=%v err=%v", found, err)
	}
	if _, _, err := BatchArgs([]string{"--global-batch-size=0"}); err == nil || !strings.Contains(err.Error(), "--global-batch-size") {
		t.Errorf("bad global batch: %v", err)
	}
}

// Megatron's --recompute-activations means selective recompute; beside
// --recompute-granularity full it is a contradiction.
func TestMegatronArgsRecomputeActivations(t *testing.T) {
	base := []string{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1000"}
	_, fixed, _, err := ModelFromArgs(append(append([]string{}, base...), "--recompute-activations"))
	if err != nil || fixed.Recompute != parallel.RecomputeSelective {
		t.Errorf("--recompute-activations: recompute %q, err %v; want selective", fixed.Recompute, err)
	}
	_, _, _, err = ModelFromArgs(append(append([]string{}, base...), "--recompute-activations", "--recompute-granularity", "full"))
	if err == nil || !strings.Contains(err.Error(), "--recompute-activations") {
		t.Errorf("with full: err = %v, want one naming --recompute-activations", err)
	}
}

// Megatron-DeepSpeed's --checkpoint-activations (examples_deepspeed's
// scripts, 6 corpus lines) is full recompute; beside selective recompute
// it is a contradiction.
func TestMegatronDeepSpeedCheckpointActivations(t *testing.T) {
	base := []string{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1000"}
	_, fixed, _, err := ModelFromArgs(append(append([]string{}, base...), "--checkpoint-activations", "--checkpoint-num-layers", "1"))
	if err != nil || fixed.Recompute != parallel.RecomputeFull {
		t.Errorf("--checkpoint-activations: recompute %q, err %v; want full", fixed.Recompute, err)
	}
	_, _, _, err = ModelFromArgs(append(append([]string{}, base...), "--checkpoint-activations", "--recompute-activations"))
	if err == nil || !strings.Contains(err.Error(), "--checkpoint-activations") {
		t.Errorf("with --recompute-activations: err = %v, want one naming --checkpoint-activations", err)
	}
}

// Megatron-DeepSpeed's GQA flag, from examples_deepspeed/pretrain_llama2_distributed.sh.
func TestMegatronDeepSpeedKeyValueHeads(t *testing.T) {
	args := strings.Fields(`--num-layers 24 --hidden-size 2048 --ffn-hidden-size 5504 --num-attention-heads 16
		--seq-length 2048 --max-position-embeddings 2048 --vocab-size 32000 --use-rotary-position-embeddings
		--untie-embeddings-and-output-weights --swiglu --num-key-value-heads 4`)
	m, _, _, err := ModelFromArgs(args)
	if err != nil || m.Groups() != 4 || m.PositionEmbedding != "rope" {
		t.Errorf("groups %d, position %q, err %v; want 4 KV groups and rope", m.Groups(), m.PositionEmbedding, err)
	}
	// Megatron's own flags win when both are given.
	m, _, _, _ = ModelFromArgs(append(args, "--group-query-attention", "--num-query-groups", "8"))
	if m.Groups() != 8 {
		t.Errorf("with --group-query-attention --num-query-groups 8: groups %d", m.Groups())
	}
}

func TestUnmodelledFeaturesAreNamed(t *testing.T) {
	// Mixture of experts is modelled; DeepEP dispatch is not.
	got := UnmodelledFeatures(strings.Fields("--num-layers 4 --num-experts 8 --moe-router-topk 2 --moe-enable-deepep --fp4-format=e2m1 --mtp-num-layers 1 --bf16"))
	want := []string{"--moe-enable-deepep", "--fp4-format", "--mtp-num-layers"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want one line for each of %v", got, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+" is passed through") || !strings.Contains(got[i], "does not model") {
			t.Errorf("line %d = %q, want it to name %s and what is not modelled", i, got[i], w)
		}
	}
	if w := UnmodelledFeatures(strings.Fields("--num-layers 4 --hidden-size 64 --bf16")); len(w) != 0 {
		t.Errorf("dense model: %q", w)
	}
}

// --attention-dropout and --hidden-dropout reach the model (nil: Megatron's
// default 0.1); a value outside [0, 1) is an error naming the flag.
func TestModelFromArgsDropout(t *testing.T) {
	base := "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --vocab-size 1000"
	for _, c := range []struct {
		args            string
		attn, hidden    float64
		wantErrContains string
	}{
		{"", 0.1, 0.1, ""},
		{" --attention-dropout 0.0 --hidden-dropout 0.0", 0, 0, ""},
		{" --hidden-dropout 0.2", 0.1, 0.2, ""},
		{" --attention-dropout 1", 0, 0, `--attention-dropout: want a probability in [0, 1), got "1"`},
		{" --hidden-dropout x", 0, 0, `--hidden-dropout: want a probability in [0, 1), got "x"`},
	} {
		m, _, _, err := ModelFromArgs(strings.Fields(base + c.args))
		if c.wantErrContains != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErrContains) {
				t.Errorf("%q: error %v, want %q", c.args, err, c.wantErrContains)
			}
			continue
		}
		if err != nil || m.AttentionDropoutP() != c.attn || m.HiddenDropoutP() != c.hidden {
			t.Errorf("%q: attention %g hidden %g (err %v), want %g and %g", c.args, m.AttentionDropoutP(), m.HiddenDropoutP(), err, c.attn, c.hidden)
		}
	}
}

// --use-precision-aware-optimizer and its dtype flags reach the plan's
// fixed settings as Megatron-LM core_v0.19.0's argparse reads them (fp32
// when a dtype flag is absent); without the switch the dtypes change
// nothing; a dtype argparse would refuse is refused naming its choices.
func TestMegatronArgsPrecisionAwareOptimizer(t *testing.T) {
	base := []string{"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1000", "--bf16", "--use-distributed-optimizer"}
	for _, tc := range []struct {
		name  string
		extra []string
		want  *parallel.PrecisionAwareOptimizer
		err   string
	}{
		{"absent", nil, nil, ""},
		{"dtypes without the switch", []string{"--exp-avg-dtype", "bf16"}, nil, ""},
		{"switch alone", []string{"--use-precision-aware-optimizer"}, &parallel.PrecisionAwareOptimizer{ExpAvgBytes: 4, ExpAvgSqBytes: 4}, ""},
		{"every dtype", []string{"--use-precision-aware-optimizer", "--main-grads-dtype", "bf16", "--main-params-dtype", "fp16", "--exp-avg-dtype", "fp8", "--exp-avg-sq-dtype", "bf16"},
			&parallel.PrecisionAwareOptimizer{MainGradsBF16: true, MainParamsFP16: true, ExpAvgBytes: 1, ExpAvgSqBytes: 2}, ""},
		{"bad dtype", []string{"--use-precision-aware-optimizer", "--exp-avg-sq-dtype", "int8"}, nil, `--exp-avg-sq-dtype: want one of fp32, fp16, bf16, fp8, got "int8"`},
		{"bf16 main params", []string{"--use-precision-aware-optimizer", "--main-params-dtype", "bf16"}, nil, `--main-params-dtype: want one of fp32, fp16, got "bf16"`},
	} {
		_, fixed, _, err := ModelFromArgs(append(append([]string{}, base...), tc.extra...))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := fixed.LowPrecisionDP.PrecisionAware
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("%s: precision-aware %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
