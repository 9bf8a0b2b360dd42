package memory

// Breakdown is per-GPU bytes by kind.
type Breakdown struct {
	Weights     float64 `json:"weights"`
	Gradients   float64 `json:"gradients"`
	Optimizer   float64 `json:"optimizer"`
	Activations float64 `json:"activations"`
	Other       float64 `json:"other"`
}

// Total sums the breakdown.
func (b Breakdown) Total() float64 {
	return b.Weights + b.Gradients + b.Optimizer + b.Activations + b.Other
}

// Estimate is the estimator's output for the worst stage of a plan.
type Estimate struct {
	PeakBytesPerGPU   float64   `json:"peak_bytes_per_gpu"`
	GPUCapacityBytes  float64   `json:"gpu_capacity_bytes"`
	HostBytesPerNode  float64   `json:"host_bytes_per_node"`
	HostCapacityBytes float64   `json:"host_capacity_bytes"`
	Breakdown         Breakdown `json:"breakdown_bytes"`
	// PeakStage is the pipeline stage with the highest peak.
	PeakStage int `json:"peak_stage"`
}

// Fits reports whether GPU and host memory both fit.
func (m Estimate) Fits() bool {
	return m.PeakBytesPerGPU <= m.GPUCapacityBytes &&
		(m.HostCapacityBytes == 0 || m.HostBytesPerNode <= m.HostCapacityBytes)
}
