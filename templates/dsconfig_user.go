package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The user's DeepSpeed config as a plan runs it (read by planner/deepspeed).

// autoBatchKeys are the "auto" values pipette-launch fills; other "auto"
// values (optimizer, scheduler) are HuggingFace's Trainer's to fill.
var autoBatchKeys = []string{"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}

// dsFillAuto replaces the "auto" batch values with cfg's, leaving every other
// byte of the file as the user wrote it.
func dsFillAuto(u *deepspeed.UserConfig, cfg parallel.Config) []byte {
	vals := map[string]int{"train_batch_size": cfg.GlobalBatch, "train_micro_batch_size_per_gpu": cfg.MicroBatch,
		"gradient_accumulation_steps": cfg.GlobalBatch / max(cfg.MicroBatch*cfg.DP, 1)}
	out := u.Data
	for _, k := range autoBatchKeys {
		if !slices.Contains(u.Auto, k) {
			continue
		}
		re := regexp.MustCompile(`("` + k + `"\s*:\s*)"auto"`)
		out = re.ReplaceAll(out, []byte("${1}"+strconv.Itoa(vals[k])))
	}
	return out
}

// dsLeftAuto lists the "auto" values dsFillAuto leaves for the script's own
// framework (HuggingFace's Trainer fills them; plain DeepSpeed rejects them).
func dsLeftAuto(u *deepspeed.UserConfig) []string {
	var out []string
	for _, k := range u.Auto {
		if !slices.Contains(autoBatchKeys, k) {
			out = append(out, k)
		}
	}
	return out
}

// dsPlanned is the config a plan runs with: the user's file as written
// (only "auto" batch values filled) when DeepSpeed would derive the plan's
// batch sizes, stage and offload from it; otherwise the user's settings
// plus the keys the plan needs (added), and with override the plan's
// values for keys the user set (changed). Precision, clipping, bucket
// sizes and everything else stay the user's.
func dsPlanned(u *deepspeed.UserConfig, cfg parallel.Config, override bool) (data []byte, added, changed []deepspeed.Change) {
	user := u.Settings()
	note := func(m map[string]any, k, name string, v any) {
		old, set := m[k]
		switch {
		case !set || old == "auto":
			added = append(added, deepspeed.Change{Key: name, Plan: v})
		case reflect.DeepEqual(old, v):
			return
		case !override:
			return // the caller refuses such a plan (deepspeed.UserConfig.PlanChanges)
		default:
			changed = append(changed, deepspeed.Change{Key: name, User: old, Plan: v})
		}
		m[k] = v
	}
	accum := cfg.GlobalBatch / max(cfg.MicroBatch*cfg.DP, 1)
	plan := map[string]int{"train_batch_size": cfg.GlobalBatch, "train_micro_batch_size_per_gpu": cfg.MicroBatch,
		"gradient_accumulation_steps": accum}
	if m, a, t, err := u.Batch(cfg.DP); err != nil || m != cfg.MicroBatch || a != accum || t != cfg.GlobalBatch {
		for _, k := range autoBatchKeys {
			note(user, k, k, float64(plan[k]))
		}
	}
	z, _ := user["zero_optimization"].(map[string]any)
	if z == nil {
		z = map[string]any{}
	}
	if max(u.Stage, 0) != cfg.ZeroStage {
		note(z, "stage", "zero_optimization.stage", float64(cfg.ZeroStage))
	}
	// legacy is DeepSpeed's deprecated spelling of the key, which it
	// refuses beside the key: a change replaces it.
	offloads := []struct {
		key, legacy, dev string
		plan             bool
		block            map[string]any
	}{
		{"offload_optimizer", "cpu_offload", u.OffloadOptimizer, cfg.Offload.OptimizerFraction > 0, map[string]any{"device": "cpu", "pin_memory": true}},
		{"offload_param", "cpu_offload_params", u.OffloadParam, cfg.Offload.Params, map[string]any{"device": "cpu", "pin_memory": true}},
	}
	if f := cfg.Offload.OptimizerFraction; f > 0 && f < 1 {
		offloads[0].block["ratio"] = f
	}
	for _, o := range offloads {
		userOn := o.dev != "" && o.dev != "none"
		switch {
		case o.plan && !userOn:
			if old, set := z[o.legacy]; set {
				if !override {
					break // the caller refuses such a plan
				}
				changed = append(changed, deepspeed.Change{Key: "zero_optimization." + o.legacy, User: old})
				delete(z, o.legacy)
			}
			note(z, o.key, "zero_optimization."+o.key, o.block)
		case !o.plan && userOn && override:
			key := o.key
			if _, set := z[o.key]; !set {
				key = o.legacy
			}
			changed = append(changed, deepspeed.Change{Key: "zero_optimization." + key, User: z[key]})
			delete(z, key)
		}
	}
	if len(z) > 0 {
		user["zero_optimization"] = z
	}
	if len(added)+len(changed) == 0 {
		return dsFillAuto(u, cfg), nil, nil
	}
	for _, k := range autoBatchKeys { // "auto" values the derivation did not need
		if user[k] == "auto" {
			note(user, k, k, float64(plan[k]))
		}
	}
	out, _ := json.MarshalIndent(user, "", "  ") // decoded JSON always encodes
	sortChanges(added)
	sortChanges(changed)
	return append(out, '\n'), added, changed
}

func sortChanges(c []deepspeed.Change) {
	sort.Slice(c, func(i, j int) bool { return c[i].Key < c[j].Key })
}

// DSConfigDiff writes changed keys as a unified-diff-like listing.
func DSConfigDiff(path string, changes []deepspeed.Change) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "--- %s (yours)\n+++ ds_config.json (the plan's, --plan-overrides-config)\n", path)
	for _, c := range changes {
		if c.User != nil {
			fmt.Fprintf(&b, "-%s: %s\n", c.Key, jsonText(c.User))
		}
		if c.Plan != nil {
			fmt.Fprintf(&b, "+%s: %s\n", c.Key, jsonText(c.Plan))
		}
	}
	return b.String()
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
