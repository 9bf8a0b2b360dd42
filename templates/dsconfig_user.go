package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// DSUserConfig is the user's own DeepSpeed config (--deepspeed_config) and
// what it fixes. Its settings are the user's: without planning the file is
// passed through byte for byte (only "auto" batch values filled); with
// planning its batch sizes, ZeRO stage and offload are search constraints,
// and precision, clipping and everything else are kept as written.
type DSUserConfig struct {
	// Flag and Path are how the script's arguments name it.
	Flag, Path string
	Data       []byte
	raw        map[string]any
	// TrainBatch, Micro and Accum are train_batch_size,
	// train_micro_batch_size_per_gpu and gradient_accumulation_steps;
	// 0 when unset or "auto".
	TrainBatch, Micro, Accum int
	// Stage is zero_optimization.stage, -1 when unset or "auto".
	Stage int
	// OffloadOptimizer and OffloadParam are the offload devices ("cpu",
	// "nvme", "none"), "" when unset.
	OffloadOptimizer, OffloadParam string
	// Auto lists the keys whose value is "auto" (HuggingFace's convention).
	Auto []string
}

// ParseDSUserConfig reads a user's config; errors name the file and key.
func ParseDSUserConfig(flag, path string, data []byte) (*DSUserConfig, error) {
	u := &DSUserConfig{Flag: flag, Path: path, Data: data, Stage: -1}
	if err := json.Unmarshal(data, &u.raw); err != nil || u.raw == nil {
		return nil, fmt.Errorf("%s %s: not a JSON object (%v)", flag, path, err)
	}
	collectAuto(u.raw, "", &u.Auto)
	sort.Strings(u.Auto)
	var errs []string
	intKey := func(m map[string]any, key, name string) int {
		v, ok := m[key]
		if !ok || v == "auto" {
			return 0
		}
		f, isNum := v.(float64)
		if !isNum || f != float64(int(f)) || f < 0 {
			errs = append(errs, fmt.Sprintf("%s: want a non-negative integer or \"auto\", got %v", name, v))
			return 0
		}
		return int(f)
	}
	u.TrainBatch = intKey(u.raw, "train_batch_size", "train_batch_size")
	u.Micro = intKey(u.raw, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu")
	u.Accum = intKey(u.raw, "gradient_accumulation_steps", "gradient_accumulation_steps")
	if z, ok := u.raw["zero_optimization"].(map[string]any); ok {
		if _, set := z["stage"]; set && z["stage"] != "auto" {
			u.Stage = intKey(z, "stage", "zero_optimization.stage")
		}
		u.OffloadOptimizer = offloadDevice(z, "offload_optimizer")
		u.OffloadParam = offloadDevice(z, "offload_param")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %s", flag, path, strings.Join(errs, "; "))
	}
	return u, nil
}

func offloadDevice(z map[string]any, key string) string {
	b, ok := z[key].(map[string]any)
	if !ok {
		return ""
	}
	d, _ := b["device"].(string)
	return strings.ToLower(d)
}

func collectAuto(m map[string]any, prefix string, out *[]string) {
	for k, v := range m {
		switch x := v.(type) {
		case string:
			if x == "auto" {
				*out = append(*out, prefix+k)
			}
		case map[string]any:
			collectAuto(x, prefix+k+".", out)
		}
	}
}

// Offloads reports whether the config offloads the optimizer states
// (true/false), or leaves it unset (nil).
func (u *DSUserConfig) Offloads() *bool {
	if u.OffloadOptimizer == "" {
		return nil
	}
	b := u.OffloadOptimizer != "none"
	return &b
}

// Batch derives the three batch values for dp data-parallel ranks as
// DeepSpeed's _set_batch_related_parameters does; an error names the keys
// that cannot hold together.
func (u *DSUserConfig) Batch(dp int) (micro, accum, train int, err error) {
	t, m, a := u.TrainBatch, u.Micro, u.Accum
	bad := func(format string, args ...any) (int, int, int, error) {
		return 0, 0, 0, fmt.Errorf("%s %s: "+format, append([]any{u.Flag, u.Path}, args...)...)
	}
	switch {
	case t > 0 && m > 0 && a > 0:
		if t != m*a*dp {
			return bad("train_batch_size %d != train_micro_batch_size_per_gpu %d x gradient_accumulation_steps %d x %d data-parallel ranks", t, m, a, dp)
		}
	case t > 0 && m > 0:
		if t%(m*dp) != 0 {
			return bad("train_batch_size %d is not divisible by train_micro_batch_size_per_gpu %d x %d data-parallel ranks", t, m, dp)
		}
		a = t / (m * dp)
	case t > 0 && a > 0:
		if t%(a*dp) != 0 {
			return bad("train_batch_size %d is not divisible by gradient_accumulation_steps %d x %d data-parallel ranks", t, a, dp)
		}
		m = t / (a * dp)
	case m > 0:
		a = max(a, 1)
		t = m * a * dp
	case t > 0:
		if t%dp != 0 {
			return bad("train_batch_size %d is not divisible by the %d data-parallel ranks", t, dp)
		}
		a, m = 1, t/dp
	default:
		return bad("neither train_batch_size nor train_micro_batch_size_per_gpu is set (DeepSpeed needs one)")
	}
	return m, a, t, nil
}

// DSChange is one key whose value a plan changes (or adds).
type DSChange struct {
	Key        string
	User, Plan any // User is nil when the config leaves the key unset
}

// PlanChanges lists the keys the user set that cfg would change: batch
// sizes, ZeRO stage and offload. An empty list means the plan keeps them.
func (u *DSUserConfig) PlanChanges(cfg parallel.Config) []DSChange {
	var out []DSChange
	accum := cfg.GlobalBatch / max(cfg.MicroBatch*cfg.DP, 1)
	for _, c := range []struct {
		key        string
		user, plan int
	}{{"train_batch_size", u.TrainBatch, cfg.GlobalBatch}, {"train_micro_batch_size_per_gpu", u.Micro, cfg.MicroBatch},
		{"gradient_accumulation_steps", u.Accum, accum}, {"zero_optimization.stage", u.Stage, cfg.ZeroStage}} {
		if c.user > 0 || (c.key == "zero_optimization.stage" && c.user >= 0) {
			if c.user != c.plan {
				out = append(out, DSChange{c.key, c.user, c.plan})
			}
		}
	}
	planDev := func(on bool) string {
		if on {
			return "cpu"
		}
		return "none"
	}
	for _, c := range []struct {
		key, user string
		plan      bool
	}{{"zero_optimization.offload_optimizer.device", u.OffloadOptimizer, cfg.Offload.OptimizerFraction > 0},
		{"zero_optimization.offload_param.device", u.OffloadParam, cfg.Offload.Params}} {
		if c.user != "" && (c.user != "none") != c.plan {
			out = append(out, DSChange{c.key, c.user, planDev(c.plan)})
		}
	}
	return out
}

// autoBatchKeys are the "auto" values pipette-launch fills; other "auto"
// values (optimizer, scheduler) are HuggingFace's Trainer's to fill.
var autoBatchKeys = []string{"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}

// FillAuto replaces the "auto" batch values with cfg's, leaving every other
// byte of the file as the user wrote it.
func (u *DSUserConfig) FillAuto(cfg parallel.Config) []byte {
	vals := map[string]int{"train_batch_size": cfg.GlobalBatch, "train_micro_batch_size_per_gpu": cfg.MicroBatch,
		"gradient_accumulation_steps": cfg.GlobalBatch / max(cfg.MicroBatch*cfg.DP, 1)}
	out := u.Data
	for _, k := range autoBatchKeys {
		if u.raw[k] != "auto" {
			continue
		}
		re := regexp.MustCompile(`("` + k + `"\s*:\s*)"auto"`)
		out = re.ReplaceAll(out, []byte("${1}"+strconv.Itoa(vals[k])))
	}
	return out
}

// LeftAuto lists the "auto" values FillAuto leaves for the script's own
// framework (HuggingFace's Trainer fills them; plain DeepSpeed rejects them).
func (u *DSUserConfig) LeftAuto() []string {
	var out []string
	for _, k := range u.Auto {
		if !contains(autoBatchKeys, k) {
			out = append(out, k)
		}
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Planned is the config a plan runs with: the user's file as written
// (only "auto" batch values filled) when DeepSpeed would derive the plan's
// batch sizes, stage and offload from it; otherwise the user's settings
// plus the keys the plan needs (added), and with override the plan's
// values for keys the user set (changed). Precision, clipping, bucket
// sizes and everything else stay the user's.
func (u *DSUserConfig) Planned(cfg parallel.Config, override bool) (data []byte, added, changed []DSChange) {
	user := deepCopy(u.raw)
	note := func(m map[string]any, k, name string, v any) {
		old, set := m[k]
		switch {
		case !set || old == "auto":
			added = append(added, DSChange{name, nil, v})
		case reflect.DeepEqual(old, v):
			return
		case !override:
			return // the caller refuses such a plan (PlanChanges)
		default:
			changed = append(changed, DSChange{name, old, v})
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
	offloads := []struct {
		key, dev string
		plan     bool
		block    map[string]any
	}{
		{"offload_optimizer", u.OffloadOptimizer, cfg.Offload.OptimizerFraction > 0, map[string]any{"device": "cpu", "pin_memory": true}},
		{"offload_param", u.OffloadParam, cfg.Offload.Params, map[string]any{"device": "cpu", "pin_memory": true}},
	}
	if f := cfg.Offload.OptimizerFraction; f > 0 && f < 1 {
		offloads[0].block["ratio"] = f
	}
	for _, o := range offloads {
		userOn := o.dev != "" && o.dev != "none"
		switch {
		case o.plan && !userOn:
			note(z, o.key, "zero_optimization."+o.key, o.block)
		case !o.plan && userOn && override:
			changed = append(changed, DSChange{"zero_optimization." + o.key, z[o.key], nil})
			delete(z, o.key)
		}
	}
	if len(z) > 0 {
		user["zero_optimization"] = z
	}
	if len(added)+len(changed) == 0 {
		return u.FillAuto(cfg), nil, nil
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

func sortChanges(c []DSChange) { sort.Slice(c, func(i, j int) bool { return c[i].Key < c[j].Key }) }

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// DSConfigDiff writes changed keys as a unified-diff-like listing.
func DSConfigDiff(path string, changes []DSChange) string {
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
