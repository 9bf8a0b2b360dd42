package run

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// scriptArgs reads a stored example command line (testdata/scripts, one
// argument per line after the comment header) and splits it into the
// launcher's arguments, the script and the script's arguments.
func scriptArgs(t *testing.T, name string) (launcher []string, script string, args []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdataDir, "scripts", name))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			all = append(all, l)
		}
	}
	for i, a := range all {
		if strings.HasSuffix(a, ".py") {
			return all[:i], a, all[i+1:]
		}
	}
	t.Fatalf("%s: no script", name)
	return nil, "", nil
}

// runCLIIn is runCLI from another directory under testdata.
func runCLIIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	io := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	t.Chdir(filepath.Join(testdataDir, dir))
	code := runApp(append([]string{"pipette-launch"}, args...), io)
	return code, out.String(), errOut.String()
}

var commandRE = regexp.MustCompile(`(?m)^(?:command of every rank:\n|  cmd )\s*(.+)$`)

// renderedCommands returns every rank command line a dry run printed.
func renderedCommands(t *testing.T, out string) []string {
	t.Helper()
	var cmds []string
	for _, m := range commandRE.FindAllStringSubmatch(out, -1) {
		cmds = append(cmds, m[1])
	}
	if len(cmds) == 0 {
		t.Fatalf("no command lines in:\n%s", out)
	}
	return cmds
}

// keepsUserArgs checks a rendered command line holds the user's arguments
// exactly, in order and unchanged, right after the interpreter and script.
func keepsUserArgs(t *testing.T, cmd, script string, user []string) {
	t.Helper()
	want := shellJoin(user)
	prefix := "python3 -u " + script + " "
	rest, ok := strings.CutPrefix(cmd, prefix)
	rest = localRankRE.ReplaceAllString(rest, "") // DeepSpeed's launcher adds it first
	if !ok || !strings.HasPrefix(rest, want) {
		t.Errorf("rendered command does not keep the user's arguments as given:\n got %s\nwant %s%s ...", cmd, prefix, want)
	}
}

var localRankRE = regexp.MustCompile(`^--local_rank=\d+ `)

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " '\"|*$") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// Megatron-LM's own GPT-3 175B example line, run unchanged (torchrun
// replaced) on a cluster file: no --vocab-size, so the vocabulary is
// GPT-2's (the vocab file is not here), padded as Megatron pads it; the
// script's TP 8 x PP 16 are constraints; every argument reaches the ranks.
func TestMegatronLM175BExampleRunsUnchanged(t *testing.T) {
	launch, script, args := scriptArgs(t, "megatron-lm-gpt3-175b.args")
	cli := append(append([]string{"--dry-run", "--cluster", "a100-16x8.yaml"}, launch...), script)
	code, out, errOut := runCLI(t, append(cli, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"TP 8 PP 16 DP 1", "micro-batch 1, global batch 1536", "vocabulary 50257 (GPT2BPETokenizer GPT-2's published vocab", "padded to 51200"} {
		if !strings.Contains(first, want) {
			t.Errorf("summary %q lacks %q", first, want)
		}
	}
	if !strings.Contains(out, "--rampup-batch-size is passed through, but the planner does not model batch-size ramp-up") {
		t.Errorf("no warning for the unmodelled --rampup-batch-size:\n%s", first)
	}
	for _, cmd := range renderedCommands(t, out) {
		keepsUserArgs(t, cmd, script, args)
	}
	if strings.Count(out, "== host ") != 16 {
		t.Errorf("want 16 hosts in the dry run")
	}
}

// Megatron-LM's Mixtral 8x7B example on 64 A100s: the model is read as the
// MoE model it is, the script's TP1 PP4 EP8 are constraints the plan keeps,
// the ranks get every argument unchanged (the script already says EP, the
// alltoall dispatcher and grouped GEMM, so nothing is added twice), and the
// final argument list passes Megatron's MoE checks.
func TestMegatronLMMixtralExampleRunsUnchanged(t *testing.T) {
	launch, script, args := scriptArgs(t, "megatron-lm-mixtral-8x7b.args")
	cli := append(append([]string{"--dry-run", "--cluster", "a100-16x8.yaml"}, launch...), script)
	code, out, errOut := runCLI(t, append(cli, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"TP 1 PP 4 DP 16", "EP 8 ETP 1", "micro-batch 1, global batch 256"} {
		if !strings.Contains(first, want) {
			t.Errorf("summary %q lacks %q", first, want)
		}
	}
	if strings.Contains(out, "does not model mixture") {
		t.Errorf("MoE warned as unmodelled:\n%s", first)
	}
	cmds := renderedCommands(t, out)
	if len(cmds) != 8 {
		t.Fatalf("%d rendered hosts, want 8", len(cmds))
	}
	for _, cmd := range cmds {
		keepsUserArgs(t, cmd, script, args)
		for _, f := range []string{"--expert-model-parallel-size", "--moe-token-dispatcher-type", "--moe-grouped-gemm"} {
			if n := strings.Count(cmd, f+" ") + strings.Count(cmd, f+"="); n != 1 && !strings.HasSuffix(cmd, f) {
				t.Errorf("%s appears %d times in %s", f, n, cmd)
			}
		}
		if !strings.Contains(cmd, "--expert-tensor-parallel-size 1") {
			t.Errorf("the plan's ETP is not rendered: %s", cmd)
		}
	}
}

// Megatron-DeepSpeed's Llama-2 example: SentencePiece tokenizer read from
// its model file, GQA from --num-key-value-heads, the script's ds_config
// kept byte for byte (the plan keeps its batch and stage), every argument
// unchanged.
func TestMegatronDeepSpeedLlama2ExampleRunsUnchanged(t *testing.T) {
	launch, script, args := scriptArgs(t, "megatron-deepspeed-llama2.args")
	cli := append(append([]string{"--dry-run", "--no-check-script", "--cluster", "../a100-16x8.yaml"}, launch...), script)
	code, out, errOut := runCLIIn(t, "mds-llama2", append(cli, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"(deepspeed): TP 2 PP 2 DP 2", "micro-batch 4, global batch 32", "ZeRO-0",
		"vocabulary 320 (GPTSentencePieceTokenizer ./tmp/tokenizer.model), padded to 512"} {
		if !strings.Contains(first, want) {
			t.Errorf("summary %q lacks %q", first, want)
		}
	}
	for _, cmd := range renderedCommands(t, out) {
		keepsUserArgs(t, cmd, script, args)
		if !strings.Contains(cmd, "--deepspeed_config=./tmp/deepspeed.json") || strings.Contains(cmd, "ds_config.json") {
			t.Errorf("the script's own ds_config should be what the ranks read: %s", cmd)
		}
	}
	if strings.Contains(out, "== file ds_config.json") {
		t.Errorf("a ds_config.json was written although the plan keeps the user's:\n%s", out)
	}
}

// FP8 on A100s is refused with a fix the user can type on run's command
// line: run has no --precision (plan has), the script's --fp8-format decides,
// and the line without the --fp8-* flags is planned.
func TestFP8OnA100SaysWhatToDropFromTheScript(t *testing.T) {
	launch, script, args := scriptArgs(t, "megatron-lm-gpt3-175b.args")
	cli := append(append([]string{"--dry-run", "--cluster", "a100-16x8.yaml"}, launch...), script)
	fp8 := append(append([]string(nil), args...), "--fp8-format", "hybrid", "--fp8-amax-history-len", "1024")
	code, _, errOut := runCLI(t, append(cli, fp8...)...)
	if code != 2 || !strings.Contains(errOut, "drop --fp8-format and the other --fp8-* flags") || strings.Contains(errOut, "--precision") {
		t.Fatalf("exit %d, stderr %s; want exit 2 naming the script's --fp8-* flags, not plan's --precision", code, errOut)
	}
	if code, _, errOut := runCLI(t, append(cli, args...)...); code != 0 {
		t.Errorf("the line without its --fp8-* flags: exit %d\n%s", code, errOut)
	}
}

// The planner reads the GQA groups Megatron-DeepSpeed's flag gives (the
// last occurrence, as argparse): 3 groups cannot share 16 heads.
func TestMegatronDeepSpeedKeyValueHeadsAreRead(t *testing.T) {
	_, script, args := scriptArgs(t, "megatron-deepspeed-llama2.args")
	args = append(append([]string(nil), args...), "--num-key-value-heads", "3")
	code, _, errOut := runCLIIn(t, "mds-llama2", append([]string{"--dry-run", "--no-check-script", "--cluster", "../a100-16x8.yaml", "--nnodes", "1", script}, args...)...)
	if code != 2 || !strings.Contains(errOut, "num_query_groups: num_attention_heads 16 is not divisible by it (3)") {
		t.Errorf("exit %d, stderr %s; want exit 2 about the 3 KV groups", code, errOut)
	}
}

func writeConfig(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The user's ZeRO-2 config (train_batch_size 64, accumulation 4, clipping
// 0.5, CPU offload) on listed hosts, without planning: the ranks read the
// user's own file, byte for byte; only "auto" batch values are filled.
func TestDeepSpeedConfigPassesThroughWithHostfile(t *testing.T) {
	user, err := os.ReadFile(filepath.Join(testdataDir, "zero2_offload.json"))
	if err != nil {
		t.Fatal(err)
	}
	hostfile := writeConfig(t, "hostfile", "worker-1 slots=8\nworker-2 slots=8\n")
	code, out, errOut := runCLI(t, "--dry-run", "--hostfile", hostfile, "train.py", "--deepspeed", "--deepspeed_config", "zero2_offload.json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if strings.Contains(out, "== file ds_config.json") || !strings.Contains(out, "--deepspeed --deepspeed_config zero2_offload.json") {
		t.Errorf("the ranks should read the user's own file, unchanged:\n%s", out)
	}
	// "auto" values: a copy with only those bytes changed (64 / (4 x 16) = 1).
	auto := strings.Replace(string(user), `"gradient_accumulation_steps": 4,`, `"gradient_accumulation_steps": 4,
  "train_micro_batch_size_per_gpu": "auto",`, 1)
	path := writeConfig(t, "auto.json", auto)
	code, out, errOut = runCLI(t, "--dry-run", "--hostfile", hostfile, "train.py", "--deepspeed", "--deepspeed_config", path)
	if code != 0 {
		t.Fatalf("auto: exit %d\n%s", code, errOut)
	}
	want := strings.Replace(auto, `"train_micro_batch_size_per_gpu": "auto"`, `"train_micro_batch_size_per_gpu": 1`, 1)
	if !strings.Contains(out, "== file /tmp/pipette-launch-pipette-ID/ds_config.json (mode 0644) ==\n"+want) || !strings.Contains(out, "--deepspeed_config /tmp/pipette-launch-pipette-ID/ds_config.json") {
		t.Errorf("auto: want the user's bytes with only \"auto\" filled:\n%s", out)
	}
	// A config that cannot hold on 16 ranks fails before anything starts.
	code, _, errOut = runCLI(t, "--dry-run", "--hosts", "w[1-3]", "--nproc-per-node", "8", "train.py", "--deepspeed", "--deepspeed_config", "zero2_offload.json")
	if code != 2 || !strings.Contains(errOut, "train_batch_size 64 is not divisible by gradient_accumulation_steps 4 x 24 data-parallel ranks") {
		t.Errorf("24 ranks: exit %d, %s", code, errOut)
	}
}

// With planning the config's batch sizes, stage and offload are search
// constraints: on 16 GPUs the plan keeps them (and the file); on 32 no plan
// can keep accumulation 4, so the run exits 2 naming the key, unless
// --plan-overrides-config, which prints the changed keys as a diff.
func TestDeepSpeedConfigConstrainsThePlan(t *testing.T) {
	base := []string{"--dry-run", "--framework", "deepspeed", "--cluster", "a100-16x8.yaml", "--model", "llama2-7b"}
	script := []string{"train.py", "--deepspeed", "--deepspeed_config", "zero2_offload.json"}
	code, out, errOut := runCLI(t, cmdtest.Cat(base, []string{"--nnodes", "2"}, script)...)
	if code != 0 {
		t.Fatalf("16 GPUs: exit %d\n%s", code, errOut)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"DP 16", "micro-batch 1, global batch 64", "ZeRO-2", "optimizer offload 1"} {
		if !strings.Contains(first, want) {
			t.Errorf("16 GPUs: summary %q lacks %q", first, want)
		}
	}
	if strings.Contains(out, "== file ds_config.json") || !strings.Contains(out, "--deepspeed_config zero2_offload.json") {
		t.Errorf("16 GPUs: the plan keeps the config, so the ranks should read it unchanged:\n%s", out)
	}
	code, _, errOut = runCLI(t, cmdtest.Cat(base, []string{"--nnodes", "4"}, script)...)
	if code != 2 || !strings.Contains(errOut, "gradient_accumulation_steps 4 (the plan needs 1)") || !strings.Contains(errOut, "--plan-overrides-config") {
		t.Errorf("32 GPUs: exit %d, stderr %s; want exit 2 naming gradient_accumulation_steps", code, errOut)
	}
	code, out, errOut = runCLI(t, cmdtest.Cat(base, []string{"--nnodes", "4", "--plan-overrides-config"}, script)...)
	if code != 0 {
		t.Fatalf("override: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"# warning: the plan overrides your DeepSpeed config:", "#   --- zero2_offload.json (yours)",
		"#   -gradient_accumulation_steps: 4", "#   +gradient_accumulation_steps: 1", `"gradient_clipping": 0.5`, "--deepspeed_config /tmp/pipette-launch-pipette-ID/ds_config.json"} {
		if !strings.Contains(out, want) {
			t.Errorf("override: output lacks %q:\n%s", want, out)
		}
	}
}

// --model on a script without shape flags: the shape is rendered into the
// argv (Megatron's or Megatron-DeepSpeed's spelling), so the job trains the
// planned model.
func TestModelRendersShapeFlags(t *testing.T) {
	cases := []struct {
		fw, model, want string
	}{
		{"megatron", "llama2-7b", "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 --swiglu --seq-length 4096 --max-position-embeddings 4096 --position-embedding-type rope --untie-embeddings-and-output-weights --vocab-size 32000"},
		{"megatron", "llama3-8b", "--num-attention-heads 32 --group-query-attention --num-query-groups 8 --swiglu"},
		{"deepspeed", "llama3-8b", "--num-attention-heads 32 --num-key-value-heads 8 --swiglu --seq-length 8192 --max-position-embeddings 8192 --use-rotary-position-embeddings --untie-embeddings-and-output-weights --vocab-size 128256"},
		{"megatron", "gpt3-1.3b", "--num-layers 24 --hidden-size 2048 --ffn-hidden-size 8192 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --vocab-size 50257"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(t, "--dry-run", "--framework", c.fw, "--cluster", "a100-16x8.yaml", "--nnodes", "2", "--model", c.model,
			"--global-batch-size", "64", "pretrain_gpt.py", "--bf16", "--data-path", "/data/x")
		if code != 0 {
			t.Errorf("%s %s: exit %d\n%s", c.fw, c.model, code, errOut)
			continue
		}
		for _, cmd := range renderedCommands(t, out) {
			keepsUserArgs(t, cmd, "pretrain_gpt.py", []string{"--bf16", "--data-path", "/data/x"})
			if !strings.Contains(cmd, c.want) {
				t.Errorf("%s %s: command lacks %q:\n%s", c.fw, c.model, c.want, cmd)
				break
			}
		}
	}
}

// A user's own layer split is a constraint with planning too: the plan
// keeps it and the user's flags reach the ranks as written.
func TestUserLayerSplitIsAPlanConstraint(t *testing.T) {
	shape := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048", "--vocab-size", "50257", "--global-batch-size", "64"}
	for _, split := range [][]string{
		{"--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "5"},
		{"--pipeline-model-parallel-size", "4", "--pipeline-model-parallel-layout", "Et*3|t*8|t*8|t*5L"},
	} {
		args := append(append([]string(nil), shape...), split...)
		code, out, errOut := runCLI(t, append([]string{"--dry-run", "--cluster", "a100-16x8.yaml", "--nnodes", "2", "pretrain_gpt.py"}, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s", split, code, errOut)
			continue
		}
		if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, "PP 4") || !strings.Contains(first, "layers per stage [3 8 8 5]") {
			t.Errorf("%v: summary %s", split, first)
		}
		for _, cmd := range renderedCommands(t, out) {
			keepsUserArgs(t, cmd, "pretrain_gpt.py", args)
			if strings.Count(cmd, "-pipeline-num-layers")+strings.Count(cmd, "--pipeline-model-parallel-layout") != len(split)/2-1 {
				t.Errorf("%v: the plan's own split flags were added beside the user's: %s", split, cmd)
			}
		}
	}
}

// Features the planner does not model pass through with a warning that
// says what the prediction leaves out.
func TestUnmodelledFeaturesPassThroughWithAWarning(t *testing.T) {
	args := []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048", "--vocab-size", "50257",
		"--global-batch-size", "64", "--num-experts", "8", "--moe-router-topk", "2", "--fp4-format", "e2m1", "--mtp-num-layers", "1"}
	code, out, errOut := runCLI(t, append([]string{"--dry-run", "--cluster", "a100-16x8.yaml", "--nnodes", "1", "pretrain_gpt.py"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{
		"# warning: --fp4-format is passed through, but the planner does not model FP4",
		"# warning: --mtp-num-layers is passed through, but the planner does not model multi-token prediction",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no warning %q", want)
		}
	}
	if strings.Contains(out, "--num-experts is passed through") {
		t.Errorf("mixture of experts is modelled now, yet warned about:\n%s", out)
	}
	for _, cmd := range renderedCommands(t, out) {
		keepsUserArgs(t, cmd, "pretrain_gpt.py", args)
		// The MoE plan's expert parallelism is rendered.
		if !strings.Contains(cmd, "--expert-model-parallel-size") || !strings.Contains(cmd, "--moe-token-dispatcher-type alltoall") {
			t.Errorf("no expert-parallel flags in %s", cmd)
		}
	}
}

// run reads the script's --tp-comm-overlap-cfg as plan --as-is does (it
// prices the overlap with it): an unreadable one is refused naming it,
// before anything starts.
func TestRunReadsTPOverlapCfg(t *testing.T) {
	launch, script, args := scriptArgs(t, "megatron-lm-gpt3-175b.args")
	cli := append(append([]string{"--dry-run", "--cluster", "a100-16x8.yaml"}, launch...), script)
	line := append(append([]string(nil), args...), "--sequence-parallel", "--tp-comm-overlap", "--tp-comm-overlap-cfg", "no-such-ub.yaml")
	code, _, errOut := runCLI(t, append(cli, line...)...)
	if code != 2 || !strings.Contains(errOut, "--tp-comm-overlap-cfg: open no-such-ub.yaml") {
		t.Fatalf("exit %d, stderr %s; want exit 2 naming the unreadable --tp-comm-overlap-cfg", code, errOut)
	}
}
