package cmdutil

import (
	"fmt"
	"os"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/megatron/tpoverlap"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

func LoadModel(spec string, seq int) (model.Model, error) {
	if spec == "" {
		return model.Model{}, fmt.Errorf("--model is required: a preset (%s) or a model YAML file", strings.Join(model.PresetNames(), ", "))
	}
	var m model.Model
	var err error
	if strings.HasSuffix(spec, ".yaml") || strings.HasSuffix(spec, ".yml") || strings.ContainsRune(spec, os.PathSeparator) {
		data, rerr := inputfile.Read(spec, limits.MaxFileBytes)
		if rerr != nil {
			return m, fmt.Errorf("--model: %w", rerr)
		}
		if m, err = model.Parse(data); err != nil {
			return m, fmt.Errorf("model %s: %w", spec, err)
		}
	} else if m, err = model.Preset(spec); err != nil {
		return m, fmt.Errorf("--model: %w", err)
	}
	if seq < 0 {
		return m, fmt.Errorf("--seq-length must be > 0 (got %d)", seq)
	}
	if seq > 0 {
		m.SeqLength = seq
		if m.MaxPositionEmbeddings > 0 && m.MaxPositionEmbeddings < seq {
			m.MaxPositionEmbeddings = seq
		}
	}
	return m, nil
}

// ParseSequenceParallel maps on/off/auto to a constraint (nil = auto).
func ParseSequenceParallel(v string) (*bool, error) {
	switch v {
	case "", "auto":
		return nil, nil
	case "on":
		b := true
		return &b, nil
	case "off":
		b := false
		return &b, nil
	}
	return nil, fmt.Errorf("--sequence-parallel %q: use on, off or auto", v)
}

// EnvLookup is os.Getenv over a KEY=VALUE list.
func EnvLookup(env []string) func(string) string {
	return func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
}

// TPOverlapCfgFromArgs reads the userbuffers configuration the Megatron
// arguments name (--tp-comm-overlap-cfg) for pricing the overlap; without
// one, nil: Transformer Engine's defaults are priced, as Megatron-LM runs
// them. plan --as-is and run read it alike.
func TPOverlapCfgFromArgs(args []string) (*parallel.TPOverlapCfg, error) {
	path := megatron.Parse(args).Value(megatron.TPCommOverlapCfgFlag)
	if path == "" {
		return nil, nil
	}
	data, err := inputfile.Read(path, limits.MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (it is read to price the overlap: give a path readable here, or leave the flag out to price Transformer Engine's defaults)", megatron.TPCommOverlapCfgFlag, err)
	}
	cfg, err := tpoverlap.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", megatron.TPCommOverlapCfgFlag, path, err)
	}
	return &cfg, nil
}
