package gpu

// Spec names a GPU model; zero fields are filled from the built-in catalog.
type Spec struct {
	Model                 string  `yaml:"model" json:"model"`
	MemoryGiB             float64 `yaml:"memory_gib,omitempty" json:"memory_gib,omitempty"`
	PeakTFLOPS            float64 `yaml:"peak_bf16_tflops,omitempty" json:"peak_bf16_tflops,omitempty"`
	MemoryBandwidthTBPerS float64 `yaml:"memory_bandwidth_tbyte_per_s,omitempty" json:"memory_bandwidth_tbyte_per_s,omitempty"`
	// PeakFP8TFLOPS is the dense FP8 tensor-core rate (0: the GPU has no
	// FP8 tensor cores, and fp8 plans are not offered on it).
	PeakFP8TFLOPS float64 `yaml:"peak_fp8_tflops,omitempty" json:"peak_fp8_tflops,omitempty"`
	// PeakFP32TFLOPS is the rate fp32 GEMMs run at: the dense TF32
	// tensor-core rate on GPUs that have one (Ampere and later; NGC PyTorch
	// containers enable TF32 for matmuls), else the FP32 CUDA-core rate
	// (Volta, Turing). 0: unknown, and fp32 plans are refused on the GPU.
	PeakFP32TFLOPS float64 `yaml:"peak_fp32_tflops,omitempty" json:"peak_fp32_tflops,omitempty"`
	// ComputeScale16 and ComputeScaleFP8 multiply the cost model's GEMM
	// rates on this GPU (0 = 1): set when a cluster file is resolved, from
	// GEMMs measured on the host and the calibration of past runs.
	ComputeScale16  float64 `yaml:"-" json:"-"`
	ComputeScaleFP8 float64 `yaml:"-" json:"-"`
	// SMs is the streaming multiprocessor count (catalog GPUs only; 0:
	// unknown): what a GEMM launched beside a communication kernel with an
	// SM margin keeps (Transformer Engine userbuffers, --tp-comm-overlap).
	SMs int `yaml:"-" json:"-"`
}

const GiB = 1 << 30
