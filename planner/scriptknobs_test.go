package planner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// The launcher's pins join the script's constraints, and every pin that
// contradicts the script, or has nothing to pin, is refused by name.
func TestApplyPins(t *testing.T) {
	t.Parallel()
	on, off := true, false
	for _, tc := range []struct {
		name    string
		pins    Pins
		script  parallel.Constraints
		fw      parallel.Framework
		planned bool
		want    parallel.Constraints
		err     string
	}{
		{name: "none given", fw: parallel.FrameworkTorch, want: parallel.Constraints{}},
		{name: "all kept off", pins: Pins{Recompute: parallel.RecomputeNone, NoOffload: true, DistributedOptimizer: &off},
			fw: parallel.FrameworkMegatron, planned: true,
			want: parallel.Constraints{Recompute: parallel.RecomputeNone, NoOffload: true, DistributedOptimizer: &off}},
		{name: "agrees with the script", pins: Pins{Recompute: parallel.RecomputeFull, Offload: true, DistributedOptimizer: &on},
			script: parallel.Constraints{Recompute: parallel.RecomputeFull, ForceOffload: true, DistributedOptimizer: &on},
			fw:     parallel.FrameworkMegatron, planned: true,
			want: parallel.Constraints{Recompute: parallel.RecomputeFull, ForceOffload: true, DistributedOptimizer: &on}},
		{name: "recompute contradicts", pins: Pins{Recompute: parallel.RecomputeNone}, script: parallel.Constraints{Recompute: parallel.RecomputeSelective},
			fw: parallel.FrameworkMegatron, planned: true, err: "--recompute none contradicts the script's arguments (they ask for selective recompute)"},
		{name: "unknown recompute", pins: Pins{Recompute: "some"}, fw: parallel.FrameworkMegatron, planned: true,
			err: `--recompute "some": want none, selective or full`},
		{name: "no offload contradicts", pins: Pins{NoOffload: true}, script: parallel.Constraints{ForceOffload: true},
			fw: parallel.FrameworkMegatron, planned: true, err: "--no-offload contradicts the script's --optimizer-cpu-offload"},
		{name: "both offload pins", pins: Pins{NoOffload: true, Offload: true}, fw: parallel.FrameworkMegatron, planned: true,
			err: "--no-offload and --offload contradict each other"},
		{name: "distributed optimizer contradicts", pins: Pins{DistributedOptimizer: &off}, script: parallel.Constraints{DistributedOptimizer: &on},
			fw: parallel.FrameworkMegatron, planned: true, err: "--distributed-optimizer=false contradicts the script's --use-distributed-optimizer"},
		{name: "a DeepSpeed job", pins: Pins{NoOffload: true}, fw: parallel.FrameworkDeepSpeed, planned: true,
			err: "--no-offload pin a Megatron-LM plan; a deepspeed job's recompute and offload are its own"},
		{name: "not planned", pins: Pins{Recompute: parallel.RecomputeNone}, fw: parallel.FrameworkMegatron,
			err: "--recompute none pin the plan's search, and without a cluster file the job runs as its script's arguments say"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.script
			err := applyPins(tc.pins, &got, tc.fw, tc.planned)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want it to say %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Recompute != tc.want.Recompute || got.NoOffload != tc.want.NoOffload || got.ForceOffload != tc.want.ForceOffload ||
				!samePtr(got.DistributedOptimizer, tc.want.DistributedOptimizer) {
				t.Errorf("constraints %+v, want %+v", got, tc.want)
			}
		})
	}
}

func samePtr(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// What a Megatron-LM plan turns on beyond the script is named with the
// estimate of the layout without it, and the pins that keep the script's
// settings; nothing is said when the script asked for it.
func TestScriptKnobsWarning(t *testing.T) {
	t.Parallel()
	m, err := model.Preset("llama3-8b")
	if err != nil {
		t.Fatal(err)
	}
	m.SeqLength = 4096
	base := parallel.Config{TP: 1, PP: 1, CP: 1, DP: 8, VPP: 1, MicroBatch: 1, GlobalBatch: 128, SequenceParallel: true,
		Recompute: parallel.RecomputeNone, Precision: gpu.PrecisionBF16, StageLayers: []int{m.NumLayers}}
	plan := func(cfg parallel.Config, capacityGiB float64) *search.Plan {
		return &search.Plan{Config: cfg, Framework: parallel.FrameworkMegatron, Memory: memory.Estimate{GPUCapacityBytes: capacityGiB * gpu.GiB}}
	}
	gib := func(cfg parallel.Config) float64 {
		return memory.EstimatePlan(m, cfg, parallel.FrameworkMegatron, 80*gpu.GiB, 0, 1).PeakBytesPerGPU / gpu.GiB
	}
	distOpt, full, offload := base, base, base
	distOpt.DistributedOptimizer = true
	full.Recompute, full.DistributedOptimizer = parallel.RecomputeFull, true
	offload.DistributedOptimizer, offload.Offload = true, parallel.Offload{OptimizerFraction: 1}
	on := true
	// The script's settings: plain Adam (16 B a parameter beside the bf16
	// weights' 2), no recompute. 8.03B parameters make the states alone
	// about 134 GiB, so "without them" is over any 80 GB GPU.
	asWritten := gib(base)
	if asWritten < 130 {
		t.Fatalf("llama3-8b without the distributed optimizer: %.1f GiB by the estimate; the cases below assume it is over 80", asWritten)
	}
	for _, tc := range []struct {
		name      string
		p         *search.Plan
		fixed     parallel.Constraints
		planIndex int
		want      []string // "" entries: no warning
	}{
		{name: "asked for by the script", p: plan(distOpt, 75.6), fixed: parallel.Constraints{DistributedOptimizer: &on}, want: nil},
		{name: "distributed optimizer for memory", p: plan(distOpt, 75.6), want: []string{
			"the plan turns on the distributed optimizer (--use-distributed-optimizer), which the script's arguments leave off: without it, this layout needs",
			"over the 75.6 GiB usable at --memory-headroom 0.05", "pass --distributed-optimizer=false to pipette-launch"}},
		{name: "three at once", p: plan(offload, 75.6), want: []string{
			"the plan turns on the optimizer's CPU offload (--optimizer-cpu-offload --use-precision-aware-optimizer --optimizer-offload-fraction 1 --overlap-cpu-optimizer-d2h-h2d) and the distributed optimizer",
			"without them, this layout needs", "pass --no-offload --distributed-optimizer=false to pipette-launch"}},
		{name: "recompute for speed", p: plan(full, 200), fixed: parallel.Constraints{DistributedOptimizer: &on}, want: []string{
			"the plan turns on full recompute (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1)",
			"without it, this layout fits by the estimate (", "and the search ranked the plan with it first", "pass --recompute none"}},
		{name: "recompute in a plan the user chose", p: plan(full, 200), fixed: parallel.Constraints{DistributedOptimizer: &on}, planIndex: 3,
			want: []string{"you chose plan 3, which has it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scriptKnobsWarning(m, tc.fixed, tc.p, 0.05, tc.planIndex)
			if len(tc.want) == 0 {
				if got != "" {
					t.Fatalf("warning %q, want none", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("warning %q\nlacks %q", got, w)
				}
			}
		})
	}
	// The figure is the estimate of the plan's layout with the script's
	// settings: here the distributed optimizer off, the rest as planned.
	got := scriptKnobsWarning(m, parallel.Constraints{}, plan(distOpt, 75.6), 0.05, 1)
	if want := fmt.Sprintf("needs %.1f GiB per GPU", asWritten); !strings.Contains(got, want) {
		t.Errorf("warning %q\nlacks %q: the estimate without the distributed optimizer", got, want)
	}
	ds := *plan(distOpt, 75.6)
	ds.Framework = parallel.FrameworkDeepSpeed
	if got := scriptKnobsWarning(m, parallel.Constraints{}, &ds, 0.05, 1); got != "" {
		t.Errorf("DeepSpeed plan: warning %q, want none (its config, not Megatron's flags, says what it runs)", got)
	}
}
