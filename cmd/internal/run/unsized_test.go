package run

import (
	"strings"
	"testing"
)

// TestNoSizingWhereNothingIsPlanned (issue 21): Megatron lines whose model
// the planner cannot size here (BERT with a WordPiece vocab file that is
// not here, T5's encoder/decoder flags, a hybrid Mamba pattern) run with
// the sizes their flags give: without planning (--hosts, -H, this machine)
// no sizing is asked for; on a cluster file the job passes through in
// torchrun's order with a note naming --model and --framework torch.
func TestNoSizingWhereNothingIsPlanned(t *testing.T) {
	bert := []string{"pretrain_bert.py", "--num-layers", "24", "--hidden-size", "1024", "--num-attention-heads", "16", "--seq-length", "512",
		"--max-position-embeddings", "512", "--micro-batch-size", "4", "--global-batch-size", "32", "--vocab-file", "bert-vocab.txt", "--tensor-model-parallel-size", "2"}
	t5 := []string{"pretrain_t5.py", "--encoder-num-layers", "12", "--decoder-num-layers", "12", "--hidden-size", "768", "--num-attention-heads", "12",
		"--encoder-seq-length", "512", "--decoder-seq-length", "128", "--micro-batch-size", "16", "--global-batch-size", "256", "--vocab-file", "bert-large-cased-vocab.txt"}
	for _, tc := range []struct {
		name  string
		where []string
		line  []string
		want  []string
	}{
		{"BERT, -H", []string{"-H", "hostfile"}, bert, []string{"TP 2 PP 1"}},
		{"BERT, this machine", []string{"--nproc_per_node", "4"}, bert, []string{"4 ranks on 1 host"}},
		{"T5, --hosts", []string{"--hosts", "n[1-2]", "--nproc_per_node", "8"}, t5, []string{"16 ranks on 2 hosts"}},
		{"BERT, cluster file", []string{"--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "1"}, bert, []string{"not planned: the script trains a BERT model", "--framework torch"}},
		{"no shape flags, cluster file", []string{"--cluster", "example", "--framework", "megatron"}, []string{"train.py", "--lr", "1"}, []string{"not planned: the script's arguments have no --num-layers", "--model", "--framework torch"}},
		{"T5, cluster file", []string{"--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "1"}, t5, []string{"not planned: the script trains an encoder-decoder model", "--model", "--framework torch"}},
	} {
		code, out, errOut := runCLI(t, append(append([]string{"--dry-run", "--no-check-script"}, tc.where...), tc.line...)...)
		if code != 0 {
			t.Errorf("%s: exit %d\n%s", tc.name, code, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%s: output lacks %q:\n%s\n%s", tc.name, w, errOut, out)
			}
		}
		if strings.Contains(errOut+out, "needed to size the model") {
			t.Errorf("%s: sizing asked for: %s", tc.name, errOut)
		}
	}
}

// TestFP32IsSaid (issue 21): a Megatron line without --bf16/--fp16 trains
// in fp32 and is planned and sized as fp32; the output says so. With
// --bf16 it says nothing of the kind.
func TestFP32IsSaid(t *testing.T) {
	gpt := []string{"pretrain_gpt.py", "--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048",
		"--max-position-embeddings", "2048", "--micro-batch-size", "1", "--global-batch-size", "64", "--vocab-size", "50257"}
	code, out, errOut := runCLI(t, append([]string{"--dry-run", "--cluster", "example", "--no-check-script"}, gpt...)...)
	if code != 0 || !strings.Contains(out+errOut, "Megatron trains in fp32: planned and sized as fp32") {
		t.Errorf("without --bf16: exit %d, no fp32 note\n%s\n%.400s", code, errOut, out)
	}
	code, out, errOut = runCLI(t, append([]string{"--dry-run", "--cluster", "example", "--no-check-script"}, append(gpt, "--bf16")...)...)
	if code != 0 || strings.Contains(out+errOut, "trains in fp32") {
		t.Errorf("with --bf16: exit %d\n%s", code, errOut)
	}
}
