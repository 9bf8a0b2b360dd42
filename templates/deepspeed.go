package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/megatron"

	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// DSConfig is the part of DeepSpeed's ds_config.json the planner decides.
type DSConfig struct {
	TrainBatchSize            int              `json:"train_batch_size"`
	TrainMicroBatchSizePerGPU int              `json:"train_micro_batch_size_per_gpu"`
	GradientAccumulationSteps int              `json:"gradient_accumulation_steps"`
	BF16                      *DSPrecision     `json:"bf16,omitempty"`
	FP16                      *DSPrecision     `json:"fp16,omitempty"`
	ZeroOptimization          DSZero           `json:"zero_optimization"`
	GradientClipping          float64          `json:"gradient_clipping,omitempty"`
	WallClockBreakdown        bool             `json:"wall_clock_breakdown"`
	ActivationCheckpointing   *DSActivationCkp `json:"activation_checkpointing,omitempty"`
}

// DSPrecision is the bf16 or fp16 block.
type DSPrecision struct {
	Enabled           bool `json:"enabled"`
	LossScale         *int `json:"loss_scale,omitempty"`
	InitialScalePower *int `json:"initial_scale_power,omitempty"`
}

// DSZero is zero_optimization.
type DSZero struct {
	Stage               int  `json:"stage"`
	OverlapComm         bool `json:"overlap_comm"`
	ContiguousGradients bool `json:"contiguous_gradients"`
	ReduceScatter       bool `json:"reduce_scatter"`
	// The bucket sizes the memory estimator counts (DeepSpeed's default is
	// 5e8 elements each, 2.5x what the plan assumed).
	ReduceBucketSize    int64      `json:"reduce_bucket_size,omitempty"`
	AllgatherBucketSize int64      `json:"allgather_bucket_size,omitempty"`
	OffloadOptimizer    *DSOffload `json:"offload_optimizer,omitempty"`
	OffloadParam        *DSOffload `json:"offload_param,omitempty"`
}

// DSOffload is offload_optimizer or offload_param.
type DSOffload struct {
	Device      string   `json:"device"`
	PinMemory   bool     `json:"pin_memory"`
	BufferCount int      `json:"buffer_count"`
	Ratio       *float64 `json:"ratio,omitempty"`
}

// DSActivationCkp is activation_checkpointing (Megatron-DeepSpeed reads it
// when the script uses DeepSpeed's checkpointing).
type DSActivationCkp struct {
	PartitionActivations bool `json:"partition_activations"`
	ContiguousMemory     bool `json:"contiguous_memory_optimization"`
}

// DeepSpeedConfig builds ds_config.json for cfg; fp16 selects fp16 with
// dynamic loss scaling, otherwise bf16.
func DeepSpeedConfig(cfg parallel.Config, fp16 bool) DSConfig {
	c := DSConfig{
		TrainBatchSize:            cfg.GlobalBatch,
		TrainMicroBatchSizePerGPU: cfg.MicroBatch,
		GradientAccumulationSteps: cfg.GlobalBatch / (cfg.MicroBatch * cfg.DP),
		ZeroOptimization: DSZero{
			Stage:               cfg.ZeroStage,
			OverlapComm:         true,
			ContiguousGradients: true,
			ReduceScatter:       true,
			ReduceBucketSize:    memory.DeepSpeedBucketElements,
			AllgatherBucketSize: memory.DeepSpeedBucketElements,
		},
		GradientClipping: 1.0,
	}
	switch {
	case cfg.Precision == gpu.PrecisionFP32:
		// fp32 plans: no bf16/fp16 section, DeepSpeed trains in fp32.
	case fp16:
		zero, power := 0, 16
		c.FP16 = &DSPrecision{Enabled: true, LossScale: &zero, InitialScalePower: &power}
	default:
		c.BF16 = &DSPrecision{Enabled: true}
	}
	if f := cfg.Offload.OptimizerFraction; f > 0 {
		o := &DSOffload{Device: "cpu", PinMemory: true, BufferCount: 4}
		if cfg.ZeroStage == 3 && f < 1 {
			o.Ratio = &f
		}
		c.ZeroOptimization.OffloadOptimizer = o
	}
	if cfg.Offload.Params && cfg.ZeroStage == 3 {
		c.ZeroOptimization.OffloadParam = &DSOffload{Device: "cpu", PinMemory: true, BufferCount: 5}
	}
	return c
}

// MarshalDSConfig renders the config as indented JSON with a final newline.
func MarshalDSConfig(c DSConfig) ([]byte, error) {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// CheckDSConfig applies the checks DeepSpeed makes when it reads
// ds_config.json (deepspeed.md) for a job with dp data-parallel ranks and pp
// pipeline stages. It reads the JSON generically so it also catches keys
// the Go struct would hide.
func CheckDSConfig(data []byte, dp, pp int) error {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("ds_config.json: %w", err)
	}
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("ds_config.json: "+format, a...)) }
	tbs, okT := jsonInt(raw, "train_batch_size")
	mbs, okM := jsonInt(raw, "train_micro_batch_size_per_gpu")
	gas, okG := jsonInt(raw, "gradient_accumulation_steps")
	switch {
	case !okT || !okM || !okG:
		fail("train_batch_size, train_micro_batch_size_per_gpu and gradient_accumulation_steps must all be integers")
	case tbs <= 0 || mbs <= 0 || gas <= 0:
		fail("batch sizes must be > 0 (train_batch_size %d, micro %d, accumulation %d)", tbs, mbs, gas)
	case tbs != mbs*gas*dp:
		fail("train_batch_size %d != micro %d * gradient_accumulation_steps %d * data-parallel size %d", tbs, mbs, gas, dp)
	}
	return errors.Join(append(errs, dsSettingsErrors(raw, pp)...)...)
}

// checkDSSettings applies DeepSpeed's checks other than the batch rule (a
// user's config may leave batch values for DeepSpeed to derive).
func checkDSSettings(data []byte, pp int) error {
	raw, err := deepspeed.Decode(data) // the user's bytes, read as DeepSpeed reads them
	if err != nil {
		return err
	}
	return errors.Join(dsSettingsErrors(raw, pp)...)
}

func dsSettingsErrors(raw map[string]any, pp int) []error {
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf("ds_config.json: "+format, a...)) }
	if enabled(raw, "bf16") && enabled(raw, "fp16") {
		fail("bf16 and fp16 are both enabled")
	}
	zero, _ := raw["zero_optimization"].(map[string]any)
	stage := 0 // DeepSpeed's default
	if v, set := zero["stage"]; set && v != "auto" {
		n, ok := jsonInt(zero, "stage")
		if !ok {
			fail("zero_optimization.stage must be an integer")
		}
		stage = n
	}
	if stage < 0 || stage > 3 {
		fail("zero_optimization.stage %d: want 0-3", stage)
	}
	if pp > 1 && stage >= 2 {
		fail("pipeline parallelism (pp %d) is not compatible with ZeRO stage %d", pp, stage)
	}
	if oo, ok := zero["offload_optimizer"].(map[string]any); ok {
		errs = append(errs, checkOffload("offload_optimizer", oo, stage, 1)...)
	}
	if op, ok := zero["offload_param"].(map[string]any); ok {
		if stage != 3 && stage != 0 {
			fail("zero_optimization.offload_param needs stage 3 (stage %d)", stage)
		}
		errs = append(errs, checkOffload("offload_param", op, stage, 3)...)
	}
	return errs
}

func checkOffload(name string, o map[string]any, stage, minStage int) []error {
	var errs []error
	dev, _ := o["device"].(string)
	switch dev {
	case "none", "cpu":
	case "nvme":
		if p, _ := o["nvme_path"].(string); p == "" {
			errs = append(errs, fmt.Errorf("ds_config.json: %s.device nvme needs nvme_path", name))
		}
	default:
		errs = append(errs, fmt.Errorf("ds_config.json: %s.device %q: want none, cpu or nvme", name, dev))
	}
	// DeepSpeed accepts an offload block without ZeRO (stage 0: unused).
	if dev != "none" && stage > 0 && stage < minStage {
		errs = append(errs, fmt.Errorf("ds_config.json: %s needs ZeRO stage >= %d (stage %d)", name, minStage, stage))
	}
	if r, ok := o["ratio"]; ok {
		f, isNum := r.(float64)
		switch {
		case !isNum || f < 0 || f > 1:
			errs = append(errs, fmt.Errorf("ds_config.json: %s.ratio %v outside 0..1", name, r))
		case f < 1 && stage != 3:
			errs = append(errs, fmt.Errorf("ds_config.json: %s.ratio %g below 1 needs ZeRO stage 3 (stage %d)", name, f, stage))
		}
	}
	if bc, ok := o["buffer_count"]; ok {
		if f, isNum := bc.(float64); !isNum || f < 1 || f != float64(int(f)) {
			errs = append(errs, fmt.Errorf("ds_config.json: %s.buffer_count %v must be a positive integer", name, bc))
		}
	}
	return errs
}

func jsonInt(m map[string]any, key string) (int, bool) {
	f, ok := m[key].(float64)
	if !ok || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func enabled(m map[string]any, key string) bool {
	b, _ := m[key].(map[string]any)
	e, _ := b["enabled"].(bool)
	return e
}

// Hostfile renders DeepSpeed's hostfile: `host slots=N`, one line per host
// in node-rank order; hosts that differ only by port are name:port (their
// labels), two entries, not one name twice (which DeepSpeed rejects).
func Hostfile(hosts []job.HostJob) []byte {
	var b strings.Builder
	b.WriteString("# DeepSpeed hostfile written by pipette-launch; line order is rank order\n")
	for i, l := range job.HostLabels(hosts) {
		b.WriteString(l + " slots=" + strconv.Itoa(len(hosts[i].Ranks)) + "\n")
	}
	return []byte(b.String())
}

// deepspeedArgs are the script flags for DeepSpeed: the config file for any
// DeepSpeed script, plus Megatron-DeepSpeed's own flags when the script is
// Megatron-DeepSpeed.
func deepspeedArgs(cfg parallel.Config, megatron bool, configPath string) []string {
	a := []string{"--deepspeed", "--deepspeed_config", configPath}
	if !megatron {
		return a
	}
	a = append(a, "--zero-stage", strconv.Itoa(cfg.ZeroStage))
	if cfg.PP == 1 {
		// Without it Megatron-DeepSpeed wraps the model in a PipelineModule,
		// which DeepSpeed does not allow with ZeRO-2/3.
		a = append(a, "--no-pipeline-parallel")
	}
	if cfg.Offload.OptimizerFraction > 0 {
		// DeepSpeedCPUAdam: a torch optimizer cannot step CPU-resident states.
		a = append(a, "--cpu-optimizer")
	}
	return a
}

// withDeepSpeedArgs keeps the user's arguments as given and appends the
// DeepSpeed flags they do not already say. A user's --deepspeed_config
// naming another file than the ranks read is replaced; a --zero-stage the
// plan does not use, or --no-pipeline-parallel / --cpu-optimizer the plan
// contradicts, is an error.
//
// A user's config flag is kept under its own name (DeepSpeed refuses
// --deepscale_config and --deepspeed_config together), and --deepspeed is
// added only with a config the user did not give (a script reads
// args.deepspeed_config without it).
//
// mds says planned holds Megatron-DeepSpeed's plan flags; without them the
// user's --no-pipeline-parallel and --cpu-optimizer stand unchecked.
func withDeepSpeedArgs(user, planned []string, mds bool) ([]string, error) {
	uf := megatron.Parse(user)
	if uf.Has("--deepspeed_config") || uf.Has("--deepscale_config") {
		var kept []string
		for i := 0; i < len(planned); i++ {
			switch {
			case planned[i] == "--deepspeed":
			case planned[i] == "--deepspeed_config" && uf.Has("--deepscale_config"):
				kept = append(kept, "--deepscale_config")
			default:
				kept = append(kept, planned[i])
			}
		}
		planned = kept
	}
	pf := megatron.Parse(planned)
	drop, replace := map[string]bool{}, map[string]bool{}
	for _, o := range pf.Occurrences() {
		v, given := uf.Last(o.Name)
		switch {
		case !given:
		case (o.Name == "--deepspeed_config" || o.Name == "--deepscale_config") && v != o.Value:
			replace[o.Name] = true
		case o.Name == "--zero-stage" && !sameValue(v, o.Value):
			return nil, fmt.Errorf("you passed --zero-stage %s but the plan uses ZeRO stage %s", v, o.Value)
		default:
			drop[o.Name] = true
		}
	}
	for _, sw := range []string{"--no-pipeline-parallel", "--cpu-optimizer"} {
		if mds && uf.Has(sw) && !pf.Has(sw) {
			return nil, fmt.Errorf("you passed %s but the plan does not use it (%s)", sw, map[string]string{
				"--no-pipeline-parallel": "it has pipeline stages", "--cpu-optimizer": "it does not offload the optimizer"}[sw])
		}
	}
	return append(uf.Without(replace), pf.Without(drop)...), nil
}

// File names the job writes into its work directory.
const (
	DSConfigFile = "ds_config.json"
	HostfileName = "hostfile"
)
