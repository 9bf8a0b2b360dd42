package search

import (
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

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
	parallel.Config
	Framework parallel.Framework `json:"framework"`
	Predicted Prediction         `json:"predicted"`
	Memory    memory.Estimate    `json:"memory"`
	Placement []RankPlacement    `json:"placement"`
	// Idle is the hosts the plan leaves without ranks, and why (nil: it
	// uses every host of the cluster).
	Idle *IdleHosts `json:"idle,omitempty"`
}

// IdleHosts is what a plan leaves unused: the hosts, their GPUs, and why.
type IdleHosts struct {
	Hosts  []string `json:"hosts"`
	GPUs   int      `json:"gpus"`
	Reason string   `json:"reason"`
}

// ModelSummary is the model part of the JSON output.
type ModelSummary struct {
	Name       string `json:"name"`
	Parameters int64  `json:"parameters"`
	// ActiveParameters is what one token uses (top-k experts; both
	// embedding matrices counted), for MoE models only.
	ActiveParameters int64       `json:"active_parameters,omitempty"`
	Model            model.Model `json:"shape"`
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
	// fitMP is the smallest TP x CP x PP of a config that fit memory (0:
	// none did): the search on fewer hosts skips layouts below it.
	fitMP int
}
