package deepspeed

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// UserConfig is the user's own DeepSpeed config (--deepspeed_config) and
// what it fixes. Its settings are the user's: without planning the file is
// passed through byte for byte (only "auto" batch values filled); with
// planning its batch sizes, ZeRO stage and offload are search constraints,
// and precision, clipping and everything else are kept as written.
type UserConfig struct {
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
	// Elastic is the enabled elasticity section (nil without one): it
	// decides the batch for each world size (Batch).
	Elastic *Elasticity
	// Trainer is HF Trainer's batch from the script's arguments, for a
	// config it fills (TrainerFillsBatch; set by the caller, which has the
	// arguments: ReadTrainerBatch).
	Trainer TrainerBatch
	// UniversalArg: the script's arguments have Megatron-DeepSpeed's
	// --universal-checkpoint (set by the caller: UniversalCheckpointArg),
	// which loads a universal checkpoint as load_universal does.
	UniversalArg bool
}

// ParseUserConfig reads a user's config; errors name the file and key.
func ParseUserConfig(flag, path string, data []byte) (*UserConfig, error) {
	u := &UserConfig{Flag: flag, Path: path, Data: data, Stage: -1}
	raw, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", flag, path, err)
	}
	u.raw = raw
	collectAuto(u.raw, "", &u.Auto)
	sort.Strings(u.Auto)
	var errs []string
	intKey := func(m map[string]any, key, name string) int {
		v, ok := m[key]
		if !ok || v == nil || v == "auto" {
			return 0 // null: DeepSpeed derives it, as when unset
		}
		f, isNum := v.(float64)
		switch {
		case !isNum:
			errs = append(errs, fmt.Sprintf("%s: want a non-negative integer, \"auto\" or null, got %s", name, describeJSON(v)))
			return 0
		case key == "stage" && !(f >= 0 && f <= 3 && f == math.Trunc(f)):
			// DeepSpeed's ZeroStageEnum has stages 0 to 3 (zero/config.py).
			errs = append(errs, fmt.Sprintf("%s: want a ZeRO stage 0, 1, 2 or 3, \"auto\" or null, got %s", name, describeJSON(v)))
			return -1
		case f < 0 || f != math.Trunc(f) || f > limits.MaxGlobalBatch:
			errs = append(errs, fmt.Sprintf("%s: want an integer from 1 to %d, \"auto\" or null, got %s", name, limits.MaxGlobalBatch, describeJSON(v)))
			return 0
		case f == 0 && key != "stage":
			// DeepSpeed asserts every batch value > 0 (_batch_assertion).
			errs = append(errs, fmt.Sprintf("%s: want a positive integer, \"auto\" or null, got 0 (DeepSpeed asserts it is greater than 0)", name))
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
		// DeepSpeed's deprecated spellings (zero/config.py): cpu_offload
		// is offload_optimizer on the CPU, cpu_offload_params offload_param;
		// each refused beside its replacement.
		for _, legacy := range []struct {
			key, replacement string
			device           *string
		}{{"cpu_offload", "offload_optimizer", &u.OffloadOptimizer}, {"cpu_offload_params", "offload_param", &u.OffloadParam}} {
			v, set := z[legacy.key]
			if !set || v == nil {
				continue
			}
			on, isBool := v.(bool)
			switch _, both := z[legacy.replacement]; {
			case !isBool:
				errs = append(errs, fmt.Sprintf("zero_optimization.%s: want true or false, got %s", legacy.key, describeJSON(v)))
			case both:
				errs = append(errs, fmt.Sprintf("zero_optimization.%s and %s are both given: DeepSpeed refuses the deprecated key beside its replacement (\"Cannot provide deprecated parameter '%s' and replacing parameter '%s' together\")", legacy.key, legacy.replacement, legacy.key, legacy.replacement))
			case on:
				*legacy.device = "cpu"
			default:
				*legacy.device = "none"
			}
		}
	}
	if u.Elastic, err = readElasticity(u.raw); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %s", flag, path, strings.Join(errs, "; "))
	}
	return u, nil
}

// describeJSON names a decoded JSON value as the user wrote it: the
// string "16" (quoted: not the number 16), 6.5, an object.
func describeJSON(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("the string %q (write numbers without quotes)", x)
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e21 {
			return strconv.FormatFloat(x, 'f', -1, 64) // 16777217, not 1.6777217e+07
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
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
func (u *UserConfig) Offloads() *bool {
	if u.OffloadOptimizer == "" {
		return nil
	}
	b := u.OffloadOptimizer != "none"
	return &b
}

// Batch derives the three batch values for dp data-parallel ranks as
// DeepSpeed's _set_batch_related_parameters does; an error names the keys
// that cannot hold together.
func (u *UserConfig) Batch(dp int) (micro, accum, train int, err error) {
	t, m, a := u.TrainBatch, u.Micro, u.Accum
	bad := func(format string, args ...any) (int, int, int, error) {
		return 0, 0, 0, fmt.Errorf("%s %s: "+format, append([]any{u.Flag, u.Path}, args...)...)
	}
	if e := u.Elastic; e != nil {
		// DeepSpeedConfig replaces the three with compute_elastic_config's
		// (runtime/config.py 732-794), refusing them beside the section
		// unless told to ignore them.
		if !e.IgnoreNonElasticBatchKey {
			for _, k := range []string{"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"} {
				if _, set := u.raw[k]; set {
					return bad("%s beside an enabled elasticity section: DeepSpeed refuses it (elasticity takes control of the batch); remove it or set elasticity.ignore_non_elastic_batch_info", k)
				}
			}
		}
		b, err := e.Batch(dp)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s %s: %w", u.Flag, u.Path, err) // an *InvalidWorldError stays one
		}
		return b.Micro, b.Accum, b.Train, nil
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
		// DeepSpeed v0.14.4's _set_batch_related_parameters asserts the
		// same, gradient_accumulation_steps alone or not.
		return bad("neither train_batch_size nor train_micro_batch_size_per_gpu is set: DeepSpeed refuses it too (\"Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided\"); add one")
	}
	return m, a, t, nil
}

// BatchNote is the batch DeepSpeed derives from the config at dp
// data-parallel ranks, for a plan's summary ("" when it derives none):
// "; DeepSpeed batch T = micro M x accumulation A x DP dp", and whence
// with an elasticity section.
func (u *UserConfig) BatchNote(dp int) string {
	m, a, t, err := u.Batch(dp)
	if err != nil {
		return ""
	}
	how := ""
	if u.Elastic != nil {
		how = ", from its elasticity section"
	}
	return fmt.Sprintf("; DeepSpeed batch %d = micro %d x accumulation %d x DP %d%s", t, m, a, dp, how)
}

// Change is one key whose value a plan changes (or adds).
type Change struct {
	Key        string
	User, Plan any // User is nil when the config leaves the key unset
}

// PlanChanges lists the keys the user set that cfg would change: batch
// sizes, ZeRO stage and offload. An empty list means the plan keeps them.
func (u *UserConfig) PlanChanges(cfg parallel.Config) []Change {
	var out []Change
	accum := cfg.GlobalBatch / max(cfg.MicroBatch*cfg.DP, 1)
	for _, c := range []struct {
		key        string
		user, plan int
	}{{"train_batch_size", u.TrainBatch, cfg.GlobalBatch}, {"train_micro_batch_size_per_gpu", u.Micro, cfg.MicroBatch},
		{"gradient_accumulation_steps", u.Accum, accum}, {"zero_optimization.stage", u.Stage, cfg.ZeroStage}} {
		if u.Elastic != nil && c.key != "zero_optimization.stage" {
			continue // DeepSpeed replaces the batch keys with the section's: below
		}
		if c.user > 0 || (c.key == "zero_optimization.stage" && c.user >= 0) {
			if c.user != c.plan {
				out = append(out, Change{c.key, c.user, c.plan})
			}
		}
	}
	if e := u.Elastic; e != nil {
		if b, err := e.Batch(cfg.DP); err != nil || b.Train != cfg.GlobalBatch || b.Micro != cfg.MicroBatch {
			out = append(out, Change{"elasticity", "its batch for DP " + strconv.Itoa(cfg.DP), fmt.Sprintf("train_batch_size %d, micro-batch %d", cfg.GlobalBatch, cfg.MicroBatch)})
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
			out = append(out, Change{c.key, c.user, planDev(c.plan)})
		}
	}
	return out
}

// Settings is a copy of the config's JSON object, for a caller to change.
func (u *UserConfig) Settings() map[string]any {
	b, _ := json.Marshal(u.raw) // decoded JSON always encodes
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
