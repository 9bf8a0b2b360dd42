package cmdutil

import (
	"fmt"
	"os"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/model"
)

func LoadModel(spec string, seq int) (model.Model, error) {
	if spec == "" {
		return model.Model{}, fmt.Errorf("--model is required: a preset (%s) or a model YAML file", strings.Join(model.PresetNames(), ", "))
	}
	var m model.Model
	var err error
	if strings.HasSuffix(spec, ".yaml") || strings.HasSuffix(spec, ".yml") || strings.ContainsRune(spec, os.PathSeparator) {
		data, rerr := os.ReadFile(spec)
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
