package memory

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// gpuOverheadH200 is testdata/gpu_overhead.py's output on one NVIDIA H200
// (driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9), copied unchanged:
// the device memory of a process's start-up stages and of four training
// steps of GPT models built as Megatron-Core keeps their tensors (the
// fourth measured by phase).
// It needs a GPU to re-measure (python3 planner/memory/testdata/
// gpu_overhead.py all); docs/cost-model.md reads it.
const gpuOverheadH200 = "testdata/gpu_overhead_h200.jsonl"

const mib = 1 << 20

// gpuStep is one measured training run: its configuration and the last
// (steady) step's peaks.
type gpuStep struct {
	name                               string
	m                                  model.Model
	cfg                                parallel.Config
	framework                          parallel.Framework
	torchLoss                          bool // Megatron's states, a torch script's loss (F.cross_entropy on fp32 logits)
	params                             float64
	allocated, reserved, processMemory float64 // bytes
}

// gpuFixedStage is one start-up stage's device memory.
type gpuFixedStage struct {
	stage                   string
	eager                   bool // CUDA_MODULE_LOADING=EAGER
	process, reserved, used float64
}

func readGPUOverhead(t *testing.T) ([]gpuStep, []gpuFixedStage) {
	t.Helper()
	f, err := os.Open(gpuOverheadH200)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []gpuStep
	var fixed []gpuFixedStage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Mode   string            `json:"mode"`
			Env    map[string]string `json:"env"`
			RC     int               `json:"rc"`
			Config *struct {
				Name                               string `json:"name"`
				Hidden, Heads, Groups, FFN, Layers int
				Vocab, Seq, MBS                    int
				SwiGLU, FP32, Unfused              bool
				TorchLoss                          bool `json:"torch_loss"`
				Recompute                          string
			} `json:"config"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", gpuOverheadH200, err)
		}
		if rec.Mode == "" {
			continue // the baseline line
		}
		if rec.RC != 0 {
			t.Fatalf("%s: a %s run failed (rc %d)", gpuOverheadH200, rec.Mode, rec.RC)
		}
		switch rec.Mode {
		case "fixed":
			var rows []struct {
				Stage string
				P     float64 `json:"process_mib"`
				R     float64 `json:"reserved_mib"`
				U     float64 `json:"device_used_mib"`
			}
			if err := json.Unmarshal(rec.Result, &rows); err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				fixed = append(fixed, gpuFixedStage{stage: r.Stage, eager: rec.Env["CUDA_MODULE_LOADING"] == "EAGER",
					process: r.P * mib, reserved: r.R * mib, used: r.U * mib})
			}
		case "step":
			var res struct {
				Params float64 `json:"params"`
				Steps  []struct {
					Allocated float64 `json:"max_allocated_mib"`
					Reserved  float64 `json:"max_reserved_mib"`
					Process   float64 `json:"process_mib"`
				} `json:"steps"`
			}
			if err := json.Unmarshal(rec.Result, &res); err != nil {
				t.Fatal(err)
			}
			c := rec.Config
			zero := 0.0
			m := model.Model{Name: c.Name, NumLayers: c.Layers, Hidden: c.Hidden, Heads: c.Heads, QueryGroups: c.Groups,
				FFNHidden: c.FFN, SwiGLU: c.SwiGLU, SeqLength: c.Seq, Vocab: c.Vocab, VocabDivisibleBy: 1,
				UntieEmbeddings: true, AttentionDropout: &zero, HiddenDropout: &zero, MaterializedAttention: c.Unfused}
			cfg := parallel.Config{TP: 1, PP: 1, DP: 1, MicroBatch: c.MBS, NumMicroBatches: 1,
				Recompute: parallel.Recompute(c.Recompute), Precision: gpu.PrecisionBF16}
			fw := parallel.FrameworkMegatron // bf16 weights, fp32 main grads, fp32 Adam: 18 B a parameter
			if c.FP32 {
				cfg.Precision, fw = gpu.PrecisionFP32, parallel.FrameworkTorch // torch.optim.Adam in fp32: 16 B
			}
			last := res.Steps[len(res.Steps)-1]
			steps = append(steps, gpuStep{name: c.Name, m: m, cfg: cfg, framework: fw, torchLoss: c.TorchLoss, params: res.Params,
				allocated: last.Allocated * mib, reserved: last.Reserved * mib, processMemory: last.Process * mib})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 || len(fixed) == 0 {
		t.Fatalf("%s holds %d step runs and %d start-up stages", gpuOverheadH200, len(steps), len(fixed))
	}
	return steps, fixed
}

// gpuStepTolerance bounds the estimate's tensors against the measured
// peak of allocated tensors (torch.cuda.max_memory_allocated) of a whole
// training step: weights, gradients, optimizer states and activations
// together, on real CUDA kernels (flash attention, fused Adam).
const gpuStepTolerance = 0.03

// TestTensorsMatchGPUSteps: the parameter count is exact, and on every
// run the estimator's tensors (the breakdown less its "Other" allowance)
// are within 3% of the peak PyTorch allocated: flash and unfused
// attention, no and full recompute, bf16 with Megatron's loss and with a
// torch script's, fp32.
func TestTensorsMatchGPUSteps(t *testing.T) {
	steps, _ := readGPUOverhead(t)
	for _, s := range steps {
		b := EstimateStage(s.m, s.cfg, s.framework, 0)
		if p := StageParameters(s.m, WithStages(s.m, s.cfg), 0); p != s.params {
			t.Errorf("%s: %.0f parameters estimated, %.0f in the model measured", s.name, p, s.params)
		}
		tensors := b.Weights + b.Gradients + b.Optimizer + b.Activations
		if s.torchLoss {
			// Megatron's optimizer states with a torch script's loss: the
			// output layer's term is the torch one (it is the peak's
			// transient here: nothing is recomputed, attention is flash).
			cfg := WithStages(s.m, s.cfg)
			tensors += outputActivationBytes(s.m, cfg, parallel.FrameworkTorch) - outputActivationBytes(s.m, cfg, s.framework)
		}
		e := tensors/s.allocated - 1
		t.Logf("%-22s tensors %8.0f MiB estimated, %8.0f measured (%+.2f%%)", s.name, tensors/mib, s.allocated/mib, 100*e)
		if math.Abs(e) > gpuStepTolerance {
			t.Errorf("%s: tensors %.0f MiB estimated, %.0f MiB allocated at the peak (%+.1f%%, want within %.0f%%)",
				s.name, tensors/mib, s.allocated/mib, 100*e, 100*gpuStepTolerance)
		}
	}
}

// TestGPUOverheadParts: what a process holds beyond its tensors, from the
// same recording. The CUDA context, cuBLAS and flash attention's kernels
// and a one-rank NCCL communicator together stay under the allowance
// (otherFixedBytes); every further communicator adds to it; and on every
// training run, the device memory beyond the tensors' peak (context,
// libraries, and what the caching allocator reserved but did not hand
// out) is covered by the allowance plus the default headroom the search
// keeps on this GPU (5% of the H200's memory: planner/search's
// DefaultMemoryHeadroom, which this package cannot import), though not
// always by the allowance alone.
func TestGPUOverheadParts(t *testing.T) {
	steps, fixed := readGPUOverhead(t)
	byStage := map[string]gpuFixedStage{}
	for _, f := range fixed {
		if !f.eager {
			byStage[f.stage] = f
		}
	}
	nonTensor := func(stage string) float64 {
		f, ok := byStage[stage]
		if !ok {
			t.Fatalf("%s has no %s stage", gpuOverheadH200, stage)
		}
		return f.process - f.reserved
	}
	ctx, libs, nccl, more := nonTensor("context"), nonTensor("flash_attention_fwd_bwd"), nonTensor("nccl_world1_allreduce"), nonTensor("nccl_plus3_communicators")
	t.Logf("beyond PyTorch's reserve: context %.0f MiB, + cuBLAS and flash attention %.0f, + one NCCL communicator %.0f, + 3 more %.0f (%.0f each)",
		ctx/mib, (libs-ctx)/mib, (nccl-libs)/mib, (more-nccl)/mib, (more-nccl)/3/mib)
	if nccl > otherFixedBytes {
		t.Errorf("context, libraries and one communicator hold %.0f MiB, over the %.0f MiB allowance", nccl/mib, float64(otherFixedBytes)/mib)
	}
	if more <= nccl {
		t.Errorf("three more communicators added nothing (%.0f MiB then %.0f MiB)", nccl/mib, more/mib)
	}
	h200, ok := gpu.Lookup("NVIDIA H200")
	if !ok {
		t.Fatal("the catalog has no H200")
	}
	const headroom = 0.05
	h200Bytes := h200.MemoryBytes()
	for _, s := range steps {
		beyond := s.processMemory - s.allocated
		t.Logf("%-20s beyond the tensors' peak %5.0f MiB: allocator %5.0f (%.1f%% of the peak), the rest %4.0f", s.name, beyond/mib,
			(s.reserved-s.allocated)/mib, 100*(s.reserved/s.allocated-1), (s.processMemory-s.reserved)/mib)
		if beyond > otherFixedBytes+headroom*h200Bytes {
			t.Errorf("%s: %.0f MiB beyond the tensors, over the allowance plus headroom", s.name, beyond/mib)
		}
		if beyond <= 0 {
			t.Errorf("%s: the process holds no more than its tensors (%.0f MiB)", s.name, beyond/mib)
		}
	}
}
