package megatron

import (
	"fmt"
	"strings"
)

// LegacyCheckpoint says the job saves in Megatron-LM's legacy `torch`
// format (--ckpt-format torch), whose shards load only with the TP, PP and
// layer split they were saved with; torch_dist (core_v0.19.0's default)
// reshards across TP, PP and DP.
func LegacyCheckpoint(args []string) bool { return Parse(args).Value("--ckpt-format") == "torch" }

// modelParallelFlags are what a legacy checkpoint's shards are cut by: TP,
// PP and how layers are split across the stages.
var modelParallelFlags = []string{"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
	"--pipeline-model-parallel-layout", "--num-layers-per-virtual-pipeline-stage",
	"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"}

// KeepModelParallel pins args' TP, PP and layer split to what ran (the
// argv a checkpoint was saved with), so a plan on other hosts changes
// only DP (and the micro-batch and accumulation that keep the global
// batch).
func KeepModelParallel(args, ran []string) []string {
	r := Parse(ran)
	drop := map[string]bool{}
	for _, f := range modelParallelFlags {
		drop[f] = true
	}
	out := Parse(args).Without(drop)
	for _, f := range modelParallelFlags {
		if v, ok := r.Last(f); ok {
			out = append(out, f, v)
		}
	}
	return out
}

// LegacyWhy says why a legacy checkpoint's job has no layout: it keeps the
// TP and PP of ran, and err is the planner's answer with them.
func LegacyWhy(ran []string, err error) error {
	r := Parse(ran)
	tp, pp := r.Value("--tensor-model-parallel-size"), r.Value("--pipeline-model-parallel-size")
	if tp == "" {
		tp = "1"
	}
	if pp == "" {
		pp = "1"
	}
	return fmt.Errorf("--ckpt-format torch loads only with the TP %s and PP %s it was saved with (torch_dist reshards), and no layout keeping them fits: %w", tp, pp, err)
}

// Resumes says the job names a checkpoint directory: --load, where
// Megatron-LM resumes from, or --save, where it writes. Without either a
// restart begins at step 0.
func Resumes(args []string) bool {
	a := Parse(args)
	return a.Has("--load") || a.Has("--save")
}

// Changes lists what differs between two argument lists as argparse reads
// them: flags whose values change, appear or go, in order of appearance.
func Changes(a, b []string) []string {
	pa, pb := Parse(a), Parse(b)
	seen := map[string]bool{}
	var out []string
	for _, occ := range append(pa.Occurrences(), pb.Occurrences()...) {
		if seen[occ.Name] {
			continue
		}
		seen[occ.Name] = true
		x, inA := pa.Last(occ.Name)
		y, inB := pb.Last(occ.Name)
		switch {
		case inA && !inB:
			out = append(out, strings.TrimSpace(occ.Name+" "+x)+" dropped")
		case !inA && inB:
			out = append(out, strings.TrimSpace(occ.Name+" "+y)+" added")
		case x != y:
			out = append(out, occ.Name+" "+x+" -> "+y)
		}
	}
	return out
}
