package search

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Memory validation (issue 29): every published run ran, so each must fit
// at the default headroom; where a source measured the peak (Sailor's
// max_mem), the estimate is scored against it. Print the table with
//
//	go test -run TestMemoryValidation -v ./planner/search/
//
// Per source: rows, rows that fit at DefaultMemoryHeadroom, the peak MAPE
// where peaks are measured (in brackets with the fixed allowance, which is
// fitted to these peaks, taken from the other table's: leave one table
// out), and the worst row (the highest estimate over capacity; for
// measured peaks, the largest error).

const sailorPeaksFile = "testdata/published-memory/sailor_gh200_peaks.tsv"

// megatronLlama3FP8Row is Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh
// (NVIDIA/Megatron-LM at 5be9626709af2722333bf54797c954c09edeada3, the
// conformance corpus line megatron-llama3-8b-fp8) on one host of 8 H100:
// TP1 PP1 CP1, micro-batch 1, global batch 128, sequence 8192, FP8 hybrid,
// distributed optimizer, --fp8-param-gather, --grad-reduce-in-bf16,
// --attention-dropout 0.0 --hidden-dropout 0.0, fused attention.
func megatronLlama3FP8Row() publishedRow {
	m := model.Model{Name: "llama3-8b-fp8-script", NumLayers: 32, Hidden: 4096, FFNHidden: 14336, Heads: 32, QueryGroups: 8,
		KVChannels: 128, SwiGLU: true, SeqLength: 8192, Vocab: 128256, UntieEmbeddings: true}.WithoutDropout()
	cfg := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 8, VPP: 1, MicroBatch: 1, GlobalBatch: 128, NumMicroBatches: 16,
		SequenceParallel: true, Recompute: parallel.RecomputeNone, Precision: gpu.PrecisionFP8, DistributedOptimizer: true,
		LowPrecisionDP: parallel.LowPrecisionDP{FP8ParamGather: true, GradReduceBF16: true}}
	return publishedRow{table: "megatron_lm_llama3_8b_fp8", name: m.Name, m: m, gpu: "h100", gpus: 8, cfg: cfg, framework: parallel.FrameworkMegatron}
}

// sailorPeaks is Sailor's measured peak bytes by table and row name.
func sailorPeaks(t *testing.T) map[string]float64 {
	t.Helper()
	f, err := os.Open(sailorPeaksFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fs := strings.Fields(text)
		if len(fs) != 3 {
			t.Fatalf("%s:%d: want table, name, max_mem_bytes", sailorPeaksFile, line)
		}
		v, err := strconv.ParseFloat(fs[2], 64)
		if err != nil {
			t.Fatalf("%s:%d: %v", sailorPeaksFile, line, err)
		}
		out[fs[0]+"/"+fs[1]] = v
	}
	return out
}

// rowMemory is the row's worst pipeline rank under the estimator, its
// "Other" allowance, and the capacity it must fit in at the default
// headroom.
func rowMemory(r publishedRow) (peak, other, capacity float64) {
	r = r.withAsRun()
	c := publishedCluster(r.gpu, r.gpus)
	cfg := r.cfg
	if len(cfg.StageLayers) == 0 {
		cfg.StageLayers = evenLayers(r.m.NumLayers, cfg.PP*max(cfg.VPP, 1))
	}
	est := memory.EstimatePlan(r.m, cfg, r.framework, c.Hosts[0].GPU.MemoryBytes()*(1-DefaultMemoryHeadroom), 0, 1)
	return est.PeakBytesPerGPU, est.Breakdown.Other, est.GPUCapacityBytes
}

// memoryRow is one row's verdict.
type memoryRow struct {
	name                  string
	peak, other, capacity float64
	measured, relErr      float64 // measured peak (0: none) and the estimate's error against it
}

// memoryTableLine summarises one source.
type memoryTableLine struct {
	source     string
	rows, fits int
	peakMAPE   float64 // NaN: no measured peaks
	worst      memoryRow
	refused    []string
	measured   []memoryRow // the rows with a measured peak
	// looMAPE is the peak MAPE with the fixed allowance taken from the
	// other tables' measured peaks (leave this table out); NaN: none.
	looMAPE float64
}

func validateMemoryTable(source string, rows []publishedRow, peaks map[string]float64) memoryTableLine {
	l := memoryTableLine{source: source, rows: len(rows), peakMAPE: math.NaN(), looMAPE: math.NaN()}
	var errs []float64
	worstScore := math.Inf(-1)
	for _, r := range rows {
		mr := memoryRow{name: r.name}
		mr.peak, mr.other, mr.capacity = rowMemory(r)
		if mr.peak <= mr.capacity {
			l.fits++
		} else {
			over := fmt.Sprintf("%s (%.1f GiB over", r.name, (mr.peak-mr.capacity)/gpu.GiB)
			miss := noFit{set: true, best: mr.peak - mr.capacity, mem: memory.Estimate{PeakBytesPerGPU: mr.peak, GPUCapacityBytes: mr.capacity}}
			if s := miss.headroomSuggestion(DefaultMemoryHeadroom); s != "" {
				over += "; the refusal names " + s[:strings.Index(s, " if ")]
			}
			l.refused = append(l.refused, over+")")
		}
		score := mr.peak / mr.capacity
		if v, ok := peaks[r.table+"/"+r.name]; ok {
			mr.measured, mr.relErr = v, mr.peak/v-1
			errs = append(errs, mr.relErr)
			l.measured = append(l.measured, mr)
			score = 10 + math.Abs(mr.relErr) // measured peaks rank the worst row by error
		}
		if score > worstScore {
			worstScore, l.worst = score, mr
		}
	}
	if len(errs) > 0 {
		l.peakMAPE, _ = mape(errs)
	}
	return l
}

// memoryValidation prices every source's rows.
func memoryValidation(t *testing.T) []memoryTableLine {
	tables := loadAllPublished(t)
	tables["megatron_lm_llama3_8b_fp8"] = []publishedRow{megatronLlama3FP8Row()}
	peaks := sailorPeaks(t)
	names := make([]string, 0, len(tables))
	for k := range tables {
		names = append(names, k)
	}
	slices.Sort(names)
	var out []memoryTableLine
	for _, n := range names {
		out = append(out, validateMemoryTable(n, tables[n], peaks))
	}
	for i := range out {
		out[i].looMAPE = leaveOneOutPeakMAPE(out, i)
	}
	return out
}

// unitemised is what a measured peak holds beyond the estimate's
// itemised tensors (weights, gradients, optimizer states, activations):
// the quantity memory's fixed "Other" allowance stands for.
func (r memoryRow) unitemised() float64 { return r.measured - (r.peak - r.other) }

// leaveOneOutPeakMAPE scores table i's measured peaks with the fixed
// allowance set to the median unitemised memory of every other table's
// measured rows: the allowance is fitted to these peaks, so each table is
// also scored without its own.
func leaveOneOutPeakMAPE(lines []memoryTableLine, i int) float64 {
	if len(lines[i].measured) == 0 {
		return math.NaN()
	}
	var others []float64
	for j, l := range lines {
		if j != i {
			for _, r := range l.measured {
				others = append(others, r.unitemised())
			}
		}
	}
	if len(others) == 0 {
		return math.NaN()
	}
	slices.Sort(others)
	median := (others[(len(others)-1)/2] + others[len(others)/2]) / 2
	var errs []float64
	for _, r := range lines[i].measured {
		errs = append(errs, (r.peak-r.other+median)/r.measured-1)
	}
	m, _ := mape(errs)
	return m
}

func (l memoryTableLine) String() string {
	peak := "-"
	if !math.IsNaN(l.peakMAPE) {
		peak = fmt.Sprintf("%.1f%% (%.1f%%)", 100*l.peakMAPE, 100*l.looMAPE)
	}
	w := l.worst
	worst := fmt.Sprintf("%s %.1f / %.1f GiB", w.name, w.peak/gpu.GiB, w.capacity/gpu.GiB)
	if w.measured > 0 {
		worst = fmt.Sprintf("%s %.1f GiB vs %.1f measured (%+.0f%%)", w.name, w.peak/gpu.GiB, w.measured/gpu.GiB, 100*w.relErr)
	}
	return fmt.Sprintf("%-26s %4d %4d %15s  %s", l.source, l.rows, l.fits, peak, worst)
}

// memoryTargets are the targets per source: every row fits, and
// for measured peaks the MAPE bound.
var memoryPeakBound = map[string]float64{
	"sailor_gh200_opt350":   0.10,
	"sailor_gh200_gptneo27": 0.10,
}

// memoryRefusalsLeft is how many published runs of a source the estimate
// still refuses at the default headroom (the target is none), and
// why; the test fails if more are refused.
var memoryRefusalsLeft = map[string]struct {
	n   int
	why string
}{
	// FP8 recipes (issue 29 lists them as the first target), priced as
	// they ran (the tables' "# as run:" lines, from NeMo's launcher
	// configurations and Bridge's performance configs): bf16 gradient
	// reduction where the recipe set it, NeMo's distributed Adam storing
	// the fp32 masters' 16-bit remainders (10 B of optimizer state, not
	// 12), no dropout in the Llama and Nemotron runs. Still refused: NeMo's
	// GPT-3 20B (TP2, micro-batch 2: 37 GiB of bf16 weights and FP8 weight
	// copies, 2.6 GiB over) and Nemotron-340B (DP 2 leaves 27 GiB of
	// optimizer state per GPU; 7.1 GiB over; its launcher yaml runs another
	// layout, PP 12 VP 8 with selective recompute). NeMo's launcher
	// configurations do not say whether FP8 parameters were gathered
	// (--fp8-param-gather would drop the bf16 weight copy). Bridge's FP8-CS
	// recipe sets fp8_param_gather (its table's header): all 4 rows fit.
	"nemo_2407_fp8": {2, "GPT3-20B and Nemotron-340B; FP8 parameter settings not published"},
	// Every flag known (fp8-param-gather, bf16 gradients, dropout 0):
	// states 41 GiB, activations 37.5 GiB (31.5 in the 32 layers; at the
	// loss the logits' fp32 softmax, 3.9 GiB, and their 16-bit copy, 2.0),
	// 4 GiB unitemised: 82.6 GiB against 76 at the 5% headroom, over the
	// whole 80 GiB. The held-out report_memory rows put the itemised
	// estimate 5-10% under what Megatron-LM allocated, not over.
	// Transformer Engine's source (NVIDIA/TransformerEngine d0067d0,
	// pytorch/module/layernorm_linear.py and linear.py) keeps what the
	// estimate prices: the weight quantized with columnwise (transpose) use
	// while grad is enabled and cached across micro-batches, the FP8 input
	// columnwise only; Megatron-LM's fp8_utils.post_all_gather_processing
	// keeps the FP8 parameters' transposes (2 B per GEMM weight).
	// No run of this script as written (CP 1) is published. The README
	// beside it at the same commit (examples/llama/README.md) gives CP 2 as
	// the default and publishes its measured run at CP 2 (8 GPUs, GA 32,
	// 13,812 tokens/s/GPU): NeMo's LLAMA3-8B row, which fits. NVIDIA's
	// own CP 1 runs on 8 H100 shard the weights and gradients too
	// (NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/llama3/
	// llama3_8b_llm_pretrain.yaml at 0aa7db3: fp8_ds/fp8_cs cp 1 with
	// use_megatron_fsdp, bf16 cp 2), and that CP 1 configuration was
	// reported out of memory at the start (Megatron-Bridge issue #771).
	// The row stays as the script says, refused.
	"megatron_lm_llama3_8b_fp8": {1, "CP 1 as the script is written, over the whole GPU by our estimate; its README's published run is CP 2 (NeMo's LLAMA3-8B row, fits); NVIDIA's CP 1 runs add Megatron-FSDP"},
	// FSDP priced as ZeRO-3 (llm-foundry's MPT/Composer activations are not
	// Megatron's: no measured grid for them), without dropout (MPT's
	// defaults, which the benchmark's yamls keep). The refused runs are
	// within 1 GiB, all on the 40 GB part, where the 4 GiB unitemised
	// allowance weighs most; the 80 GB parts' runs all fit.
	"llmfoundry_a100_40_bf16": {8, "FSDP/MPT activations not measured; within 1 GiB"},
}

// TestMemoryValidation prints the memory validation table and requires
// every published run to fit at the default headroom (but for
// memoryRefusalsLeft) and Sailor's measured peaks within 10% (MAPE, also
// leaving each table out of the fixed allowance's fit).
func TestMemoryValidation(t *testing.T) {
	lines := memoryValidation(t)
	var b strings.Builder
	fmt.Fprintf(&b, "%-26s %4s %4s %15s  %s\n", "source", "rows", "fits", "peakMAPE (LOO)", "worst row (estimate / capacity at the default headroom)")
	for _, l := range lines {
		fmt.Fprintln(&b, l)
	}
	t.Logf("memory validation at --memory-headroom %.2f:\n%s", DefaultMemoryHeadroom, b.String())
	t.Logf("\n%s", megatronReportTable(megatronReportRows(t)))
	for _, l := range lines {
		if left := memoryRefusalsLeft[l.source]; len(l.refused) > left.n {
			t.Errorf("%s: %d of %d runs refused (%d known: %s): %s", l.source, len(l.refused), l.rows, left.n, left.why, strings.Join(l.refused, ", "))
		} else if len(l.refused) > 0 {
			t.Logf("%s: %d refused (%s): %s", l.source, len(l.refused), left.why, strings.Join(l.refused, ", "))
		}
		if bound, ok := memoryPeakBound[l.source]; ok && !(l.peakMAPE <= bound && l.looMAPE <= bound) {
			t.Errorf("%s: peak MAPE %.1f%% (leave-one-out %.1f%%), want <= %.0f%%", l.source, 100*l.peakMAPE, 100*l.looMAPE, 100*bound)
		}
	}
}

// TestKorthikantiActivations: the first pipeline stage's activations of
// Korthikanti et al.'s runs (korthikanti_table4: sequence parallelism and
// selective recompute) within 5% of the paper's own accounting (arXiv
// 2205.05198, Table 2 and section 4.2-4.3): 34*s*b*h*L/t for the L layers'
// worth the first stage holds under 1F1B, the embedding dropout's
// s*b*h*p/t, and with p = 1 the output layer's 4*s*b*h/t*(1 + v/h).
// Before issue 29 the 22B row was +6.4% (the recompute working set was
// added to the output layer's logits, which are freed before it runs).
func TestKorthikantiActivations(t *testing.T) {
	for _, r := range loadPublished(t, "testdata/published/korthikanti_table4.tsv") {
		cfg := r.cfg
		cfg.StageLayers = evenLayers(r.m.NumLayers, cfg.PP)
		// The paper accounts for what backward keeps; the scores buffer
		// unfused attention reuses is a workspace beside it.
		got := memory.EstimateStage(r.m, cfg, r.framework, 0).Activations - memory.ScoreBufferBytes(r.m, memory.Normalized(cfg))
		s, b, h, tp := float64(r.m.SeqLength), float64(cfg.MicroBatch), float64(r.m.Hidden), float64(cfg.TP)
		l, p := float64(r.m.NumLayers), float64(cfg.PP)
		paper := 34*s*b*h*l/tp + s*b*h*p/tp
		if cfg.PP == 1 {
			paper += 4 * s * b * h / tp * (1 + float64(r.m.PaddedVocab(cfg.TP))/h)
		}
		if e := got/paper - 1; math.Abs(e) > 0.05 {
			t.Errorf("%s: activations %.2f GB, the paper's accounting %.2f GB (%+.1f%%), want within 5%%", r.name, got/1e9, paper/1e9, 100*e)
		} else {
			t.Logf("%s: %.2f GB vs %.2f GB (%+.1f%%)", r.name, got/1e9, paper/1e9, 100*e)
		}
	}
}
