// Package tpoverlap reads Megatron-LM's --tp-comm-overlap-cfg: a YAML file
// of Transformer Engine's userbuffers settings, merged over TE's defaults
// per GEMM, as the planner prices TP communication overlap.
package tpoverlap

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// ubFile is a --tp-comm-overlap-cfg document: the GEMMs of
// Transformer Engine's initialize_ub, each with its settings. proj_wgrad
// and fc2_wgrad (TE's "external" overlaps) are read, not priced.
type ubFile struct {
	QKVFprop  *ubEntry `yaml:"qkv_fprop"`
	ProjFprop *ubEntry `yaml:"proj_fprop"`
	FC1Fprop  *ubEntry `yaml:"fc1_fprop"`
	FC2Fprop  *ubEntry `yaml:"fc2_fprop"`
	ProjDgrad *ubEntry `yaml:"proj_dgrad"`
	FC2Dgrad  *ubEntry `yaml:"fc2_dgrad"`
	QKVDgrad  *ubEntry `yaml:"qkv_dgrad"`
	QKVWgrad  *ubEntry `yaml:"qkv_wgrad"`
	FC1Dgrad  *ubEntry `yaml:"fc1_dgrad"`
	FC1Wgrad  *ubEntry `yaml:"fc1_wgrad"`
	ProjWgrad *ubEntry `yaml:"proj_wgrad"`
	FC2Wgrad  *ubEntry `yaml:"fc2_wgrad"`
}

// ubEntry is one GEMM's settings: the keys initialize_ub's add_ub takes.
// Method, num_sm, set_sm_margin and num_splits are priced; the rest only
// checked.
type ubEntry struct {
	Method                     *string `yaml:"method"`
	NumSM                      *int    `yaml:"num_sm"`
	SetSMMargin                *pyBool `yaml:"set_sm_margin"`
	NumSplits                  *int    `yaml:"num_splits"`
	CGASize                    *int    `yaml:"cga_size"`
	Aggregate                  *pyBool `yaml:"aggregate"`
	AtomicGEMM                 *pyBool `yaml:"atomic_gemm"`
	UseCE                      *pyBool `yaml:"use_ce"`
	FP8Buf                     *pyBool `yaml:"fp8_buf"`
	IsReduceScatter            *pyBool `yaml:"is_reduce_scatter"`
	CommPriority               *int    `yaml:"comm_priority"`
	GEMMPriority               *int    `yaml:"gemm_priority"`
	PipelineRSOverlapFirstGEMM *pyBool `yaml:"pipeline_rs_overlap_first_gemm"`
}

// pyBool is a flag as Python reads it from YAML: true/false, or the 0/1
// NVIDIA's published ub configurations write (yaml.safe_load gives ints,
// which Transformer Engine takes by truth).
type pyBool bool

func (b *pyBool) UnmarshalYAML(n *yaml.Node) error {
	switch n.Value {
	case "true", "True", "1":
		*b = true
	case "false", "False", "0":
		*b = false
	default:
		return fmt.Errorf("line %d: got %q; want true, false, 0 or 1", n.Line, n.Value)
	}
	return nil
}

// pyBoolCheck is yamlcheck's check of a pyBool.
func pyBoolCheck(w *yamlcheck.Walker, n *yaml.Node, path string) {
	var b pyBool
	if n.Kind != yaml.ScalarNode || b.UnmarshalYAML(n) != nil {
		w.Bad(n, path, "got %s; want true, false, 0 or 1", yamlcheck.Describe(n))
	}
}

// Parse reads a --tp-comm-overlap-cfg file the way Transformer
// Engine's initialize_ub merges it: every GEMM starts from TE's default
// (parallel.DefaultTPOverlap), and the keys a GEMM's entry gives replace
// the default's. A method that GEMM cannot run is refused as TE refuses
// it (pipeline for an all-gather).
func Parse(data []byte) (parallel.TPOverlapCfg, error) {
	var f ubFile
	pos, err := yamlcheck.Decode(data, &f, yamlcheck.Hooks{reflect.TypeOf(pyBool(false)): pyBoolCheck})
	if err != nil {
		return parallel.TPOverlapCfg{}, err
	}
	cfg := parallel.DefaultTPOverlap()
	var errs yamlcheck.Problems
	for _, g := range []struct {
		name   string
		entry  *ubEntry
		dst    *parallel.TPOverlapGEMM
		gather bool
	}{
		{"qkv_fprop", f.QKVFprop, &cfg.QKVFprop, true}, {"proj_fprop", f.ProjFprop, &cfg.ProjFprop, false},
		{"fc1_fprop", f.FC1Fprop, &cfg.FC1Fprop, true}, {"fc2_fprop", f.FC2Fprop, &cfg.FC2Fprop, false},
		{"proj_dgrad", f.ProjDgrad, &cfg.ProjDgrad, true}, {"fc2_dgrad", f.FC2Dgrad, &cfg.FC2Dgrad, true},
		{"qkv_dgrad", f.QKVDgrad, &cfg.QKVDgrad, true}, {"qkv_wgrad", f.QKVWgrad, &cfg.QKVWgrad, false},
		{"fc1_dgrad", f.FC1Dgrad, &cfg.FC1Dgrad, true}, {"fc1_wgrad", f.FC1Wgrad, &cfg.FC1Wgrad, false},
	} {
		if g.entry != nil {
			g.entry.applyTo(g.dst, g.name, g.gather, &errs)
		}
	}
	errs.Locate(pos)
	return cfg, errs.Err("tp-comm-overlap configuration")
}

// applyTo overrides the settings e gives.
func (e *ubEntry) applyTo(g *parallel.TPOverlapGEMM, name string, gather bool, errs *yamlcheck.Problems) {
	if e.Method != nil {
		switch m := parallel.TPOverlapMethod(*e.Method); m {
		case parallel.TPOverlapRingExchange, parallel.TPOverlapBulk:
			g.Method = m
		case parallel.TPOverlapPipeline:
			if gather {
				errs.Add(name+".method", "pipeline overlap is not supported for an all-gather (Transformer Engine refuses it): want ring_exchange or bulk")
			}
			g.Method = m
		default:
			errs.Add(name+".method", "got %q; want ring_exchange, pipeline or bulk", *e.Method)
		}
	}
	for _, v := range []struct {
		key string
		src *int
		dst *int
		min int
	}{{"num_sm", e.NumSM, &g.NumSM, 1}, {"num_splits", e.NumSplits, &g.NumSplits, 1}} {
		if v.src == nil {
			continue
		}
		if *v.src < v.min {
			errs.Add(name+"."+v.key, "got %d; want at least %d", *v.src, v.min)
			continue
		}
		*v.dst = *v.src
	}
	if e.SetSMMargin != nil {
		g.SetSMMargin = bool(*e.SetSMMargin)
	}
}
