package planner

// Recompute is the activation recomputation mode.
type Recompute string

const (
	RecomputeNone      Recompute = "none"
	RecomputeSelective Recompute = "selective"
	RecomputeFull      Recompute = "full"
)

// Framework is the training framework a plan is for; it decides which
// options exist (ZeRO-2/3 only in DeepSpeed, the distributed optimizer and
// interleaving only in Megatron-LM).
type Framework string

const (
	FrameworkMegatron  Framework = "megatron"
	FrameworkDeepSpeed Framework = "deepspeed"
	FrameworkTorch     Framework = "torch"
)

// Precision is the GEMM precision of a training run: bf16 or fp16 mixed
// precision, or fp8 as Transformer Engine runs it in Megatron-LM
// (--fp8-format hybrid: E4M3 forward, E5M2 gradients; attention, norms and
// the optimizer stay in bf16/fp32).
type Precision string

const (
	PrecisionBF16 Precision = "bf16"
	PrecisionFP16 Precision = "fp16"
	PrecisionFP8  Precision = "fp8"
)

// Offload is how much state lives in host memory.
type Offload struct {
	// OptimizerFraction of the optimizer states (and their update) on CPU.
	OptimizerFraction float64 `json:"optimizer_fraction"`
	// Params: ZeRO-3 parameters offloaded to CPU.
	Params bool `json:"params"`
}

// Config is one point of the search space.
type Config struct {
	TP int `json:"tp"`
	PP int `json:"pp"`
	DP int `json:"dp"`
	CP int `json:"cp"`
	// EP is the expert parallel size and ETP the expert tensor parallel
	// size of an MoE model's expert layers (0 = 1 and TP: dense models).
	// Experts are laid out over the same ranks as TP x CP x DP, so EP does
	// not change the world size: expert-DP = world / (ETP x EP x PP).
	EP                   int       `json:"ep,omitempty"`
	ETP                  int       `json:"etp,omitempty"`
	VPP                  int       `json:"vpp"` // virtual stages per pipeline rank; 1 = plain 1F1B
	MicroBatch           int       `json:"micro_batch_size"`
	GlobalBatch          int       `json:"global_batch_size"`
	NumMicroBatches      int       `json:"num_micro_batches"`
	SequenceParallel     bool      `json:"sequence_parallel"`
	Recompute            Recompute `json:"recompute"`
	ZeroStage            int       `json:"zero_stage"`
	DistributedOptimizer bool      `json:"distributed_optimizer"`
	Offload              Offload   `json:"offload"`
	// Precision is "" (= bf16), bf16, fp16 or fp8.
	Precision Precision `json:"precision,omitempty"`
	// StageLayers[i] is the decoder layers of pipeline stage i (PP*VPP
	// entries, stage i = vpp_index*PP + pp_rank as in Megatron's layout).
	StageLayers []int `json:"stage_layers"`
}

// ExpertParallel returns EP and ETP with their defaults (1 and TP).
func (c Config) ExpertParallel() (ep, etp int) {
	ep, etp = max(c.EP, 1), c.ETP
	if etp < 1 {
		etp = max(c.TP, 1)
	}
	return ep, etp
}

// ExpertDP is the expert data-parallel size Megatron's parallel_state
// derives: world / (ETP x EP x PP).
func (c Config) ExpertDP() int {
	ep, etp := c.ExpertParallel()
	return max(1, c.WorldSize()/(etp*ep*max(c.PP, 1)))
}

// WorldSize is the number of ranks the config needs.
func (c Config) WorldSize() int { return c.TP * c.PP * c.DP * c.CP }

// TimeBreakdown splits the iteration time by what the critical path waits on.
type TimeBreakdown struct {
	Compute float64 `json:"compute"`
	TP      float64 `json:"tp"`
	// EP is the expert all-to-all (dispatch and combine, and the ETP
	// gather) of MoE layers on the critical path; 0 for dense models.
	EP      float64 `json:"ep,omitempty"`
	PP      float64 `json:"pp"`
	DP      float64 `json:"dp"`
	Offload float64 `json:"offload"`
}

// Prediction is the latency model's output for one plan.
type Prediction struct {
	IterationSeconds float64 `json:"iteration_seconds"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
	// TFLOPSPerGPU counts model FLOPs (forward + backward, no
	// recomputation: 6 x parameters x tokens plus attention);
	// HWTFLOPSPerGPU adds what recomputation runs again (hardware FLOPs,
	// what Narayanan et al. 2021 report).
	TFLOPSPerGPU   float64       `json:"tflops_per_gpu"`
	HWTFLOPSPerGPU float64       `json:"hw_tflops_per_gpu"`
	BubbleFraction float64       `json:"bubble_fraction"`
	Breakdown      TimeBreakdown `json:"breakdown_seconds"`
}

// MemoryBreakdown is per-GPU bytes by kind.
type MemoryBreakdown struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer"`
	Activations float64 `json:"activations"`
	Other       float64 `json:"other"`
}

// Total sums the breakdown.
func (b MemoryBreakdown) Total() float64 {
	return b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Other
}

// MemoryEstimate is the estimator's output for the worst stage of a plan.
type MemoryEstimate struct {
	PeakBytesPerGPU   float64         `json:"peak_bytes_per_gpu"`
	GPUCapacityBytes  float64         `json:"gpu_capacity_bytes"`
	HostBytesPerNode  float64         `json:"host_bytes_per_node"`
	HostCapacityBytes float64         `json:"host_capacity_bytes"`
	Breakdown         MemoryBreakdown `json:"breakdown_bytes"`
	// PeakStage is the pipeline stage with the highest peak.
	PeakStage int `json:"peak_stage"`
}

// Fits reports whether GPU and host memory both fit.
func (m MemoryEstimate) Fits() bool {
	return m.PeakBytesPerGPU <= m.GPUCapacityBytes &&
		(m.HostCapacityBytes == 0 || m.HostBytesPerNode <= m.HostCapacityBytes)
}

// RankPlacement says where one global rank runs.
type RankPlacement struct {
	Rank      int    `json:"rank"`
	Host      string `json:"host"`
	HostIndex int    `json:"host_index"`
	LocalRank int    `json:"local_rank"`
	GPU       int    `json:"gpu"`
}

// Plan is a config with its predictions and placement.
type Plan struct {
	Config
	Framework Framework       `json:"framework"`
	Predicted Prediction      `json:"predicted"`
	Memory    MemoryEstimate  `json:"memory"`
	Placement []RankPlacement `json:"placement"`
}

// ModelSummary is the model part of the JSON output.
type ModelSummary struct {
	Name       string `json:"name"`
	Parameters int64  `json:"parameters"`
	// ActiveParameters is what one token uses (top-k experts; both
	// embedding matrices counted), for MoE models only.
	ActiveParameters int64 `json:"active_parameters,omitempty"`
	Model            Model `json:"shape"`
}

// Result is what Search returns and `plan --json` prints.
type Result struct {
	Model ModelSummary `json:"model"`
	Plans []Plan       `json:"plans"`
	// Considered is how many configs were evaluated; RejectedMemory how many
	// of those did not fit.
	Considered     int `json:"considered"`
	RejectedMemory int `json:"rejected_memory"`
	// Comparison is the best plan with and without CPU offload (nil for
	// searches that ignore islands).
	Comparison *OffloadComparison `json:"comparison,omitempty"`
}
