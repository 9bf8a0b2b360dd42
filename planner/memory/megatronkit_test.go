package memory

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// megatronTheoreticalScript runs compute_weight_and_optimizer_memory and
// compute_activation_memory of megatron/training/theoretical_memory_usage.py,
// read from the Megatron-LM core_v0.19.0 source archive of the framework
// kits (commit 5be9626709af2722333bf54797c954c09edeada3) and executed as
// written, with its two imports from megatron.training.utils replaced (a
// dense GPT is not hybrid; nothing is printed). argv: archive, JSON list of
// argument namespaces (plus num_microbatches); unset arguments are None.
const megatronTheoreticalScript = `
import ast, json, math, sys, tarfile
tar = tarfile.open(sys.argv[1])
path = "megatron-lm-core_v0.19.0/megatron/training/theoretical_memory_usage.py"
tree = ast.parse(tar.extractfile(path).read())
body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))]
ns = {"math": math, "is_hybrid_model": lambda args: False, "print_rank_0": lambda *a, **k: None}
exec(compile(ast.Module(body=body, type_ignores=[]), path, "exec"), ns)
class Args:
    def __init__(self, d): self.__dict__.update(d)
    def __getattr__(self, name): return None
out = []
for d in json.loads(sys.argv[2]):
    nmb = d.pop("num_microbatches")
    a = Args(d)
    out.append([ns["compute_weight_and_optimizer_memory"](a), ns["compute_activation_memory"](a, num_microbatches=nmb)])
print(json.dumps(out))
`

// kitArchive is the framework kits' source archive named, or "" (the test
// skips) when neither $PIPETTE_FRAMEWORKS nor ../shared/frameworks beside
// the repository has it.
func kitArchive(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("PIPETTE_FRAMEWORKS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "frameworks")
	}
	archive := filepath.Join(dir, "src", name)
	if _, err := os.Stat(archive); err != nil {
		t.Skipf("the framework kits' source archive: %v", err)
	}
	return archive
}

// TestMegatronTheoreticalMemoryFromKit holds the estimate to Megatron-LM's
// own theoretical_memory_usage.py, run from the kit's archive, on the cases
// of TestMatchesMegatronTheoreticalMemory (sequence parallelism and
// selective recompute, which that function assumes): model states within
// 0.2% (Megatron counts LayerNorm biases and keeps them unsplit) and the
// first stage's activations exactly.
func TestMegatronTheoreticalMemoryFromKit(t *testing.T) {
	archive := kitArchive(t, "megatron-lm-core_v0.19.0.tar.gz")
	cases := theoreticalMemoryCases()
	var calls []map[string]any
	for i := range cases {
		c := &cases[i]
		c.cfg.SequenceParallel, c.cfg.Recompute = true, parallel.RecomputeSelective
		m, cfg := c.m, Normalized(c.cfg)
		var vpp any
		if cfg.VPP > 1 {
			vpp = cfg.VPP
		}
		calls = append(calls, map[string]any{
			"num_microbatches": cfg.NumMicroBatches, "num_layers": m.NumLayers, "hidden_size": m.Hidden,
			"num_attention_heads": m.Heads, "kv_channels": m.HeadDim(), "ffn_hidden_size": m.FFN(), "swiglu": m.SwiGLU,
			"group_query_attention": m.Groups() != m.Heads, "num_query_groups": m.Groups(),
			"seq_length": m.SeqLength, "padded_vocab_size": m.PaddedVocab(cfg.TP), "micro_batch_size": cfg.MicroBatch,
			"untie_embeddings_and_output_weights": m.UntieEmbeddings, "add_bias_linear": true,
			"tensor_model_parallel_size": cfg.TP, "pipeline_model_parallel_size": cfg.PP,
			"virtual_pipeline_model_parallel_size": vpp, "data_parallel_size": cfg.DP,
			"world_size": cfg.TP * cfg.PP * cfg.DP, "expert_tensor_parallel_size": cfg.TP, "expert_model_parallel_size": 1,
			"use_distributed_optimizer": cfg.DistributedOptimizer, "sequence_parallel": true, "recompute_granularity": "selective",
		})
	}
	arg, _ := json.Marshal(calls)
	out, err := exec.Command("python3", "-c", megatronTheoreticalScript, archive, string(arg)).Output()
	if err != nil {
		t.Fatalf("running Megatron's theoretical_memory_usage: %v", err)
	}
	var res [][2]float64 // (weights and optimizer, activations) per case
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("theoretical_memory_usage printed %q: %v", out, err)
	}
	for i, c := range cases {
		got := EstimateStage(c.m, c.cfg, parallel.FrameworkMegatron, 0)
		states, act := res[i][0], res[i][1]
		if gs := got.Weights + got.Gradients + got.Optimizer; !relClose(gs, states, 2e-3) {
			t.Errorf("%s %+v: states %.4g GB, Megatron's %.4g GB", c.m.Name, c.cfg, gs/1e9, states/1e9)
		}
		if act += logitsCopyBeyondMegatron(c.m, c.cfg); !relClose(got.Activations, act, 1e-9) {
			t.Errorf("%s %+v: activations %.6g GB, Megatron's %.6g GB", c.m.Name, c.cfg, got.Activations/1e9, act/1e9)
		}
	}
}
