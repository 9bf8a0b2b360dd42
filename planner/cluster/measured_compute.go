package cluster

import (
	"fmt"
	"slices"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"gopkg.in/yaml.v3"
)

// MeasuredCompute is what `probe --measure` found each host's accelerators
// (or CPU process slots) achieve: GEMM rates at the shapes that matter and
// the intra-host all-reduce bus bandwidth. Where present it replaces the
// catalog's rate (scaled through the cost model's own GEMM curve) and the
// nominal intra-host bus.
type MeasuredCompute struct {
	MeasuredAt time.Time `yaml:"measured_at" json:"measured_at"`
	// Tool names what measured (torch version and backend).
	Tool  string        `yaml:"tool,omitempty" json:"tool,omitempty"`
	Hosts []HostCompute `yaml:"hosts" json:"hosts"`
}

// HostCompute is one host's measurement.
type HostCompute struct {
	Host string `yaml:"host" json:"host"`
	// Device is "cuda: <name>" or "cpu".
	Device string `yaml:"device" json:"device"`
	// Workers is how many devices (or CPU slots) ran the sweep at once;
	// rates are per worker.
	Workers int `yaml:"workers" json:"workers"`
	// ThreadsPerWorker is torch's intra-op threads per CPU worker.
	ThreadsPerWorker int          `yaml:"threads_per_worker,omitempty" json:"threads_per_worker,omitempty"`
	GEMM             []GEMMSample `yaml:"gemm" json:"gemm"`
	// AllReduceBusGBytePerS is the all-reduce bus bandwidth among the
	// host's workers (NCCL's busbw convention: 2(n-1)/n x bytes / time),
	// the figure the cost model's ring formula divides by. 0: not measured.
	AllReduceBusGBytePerS float64 `yaml:"allreduce_bus_gbyte_per_s,omitempty" json:"allreduce_bus_gbyte_per_s,omitempty"`
	AllReduceBytes        int64   `yaml:"allreduce_bytes,omitempty" json:"allreduce_bytes,omitempty"`
}

// GEMMSample is the median rate of one m x k times k x n GEMM.
type GEMMSample struct {
	Precision string  `yaml:"precision" json:"precision"` // bf16, fp16, fp32
	M         int     `yaml:"m" json:"m"`
	N         int     `yaml:"n" json:"n"`
	K         int     `yaml:"k" json:"k"`
	TFLOPS    float64 `yaml:"tflops" json:"tflops"`
}

// MarshalYAML writes a sample on one line.
func (s GEMMSample) MarshalYAML() (any, error) {
	type plain GEMMSample
	var n yaml.Node
	if err := n.Encode(plain(s)); err != nil {
		return nil, err
	}
	n.Style = yaml.FlowStyle
	return &n, nil
}

// measuredPrecisions are the sample precisions that set the 16-bit rate, in
// order of preference: a GPU trains in bf16/fp16; a CPU slot (the test-bed)
// runs fp32, which is then the rate its jobs see.
var measuredPrecisions = []string{"bf16", "fp16", "fp32"}

func validateMeasuredCompute(errs *yamlcheck.Problems, m *MeasuredCompute, hosts map[string]string) {
	seen := map[string]bool{}
	for i, h := range m.Hosts {
		p := fmt.Sprintf("measured_compute.hosts[%d]", i)
		if _, ok := hosts[h.Host]; !ok {
			errs.Add(p+".host", "unknown host %q", h.Host)
		}
		if seen[h.Host] {
			errs.Add(p+".host", "duplicate host %q", h.Host)
		}
		seen[h.Host] = true
		if h.Workers < 0 || h.Workers > limits.MaxGPUsPerHost {
			errs.Add(p+".workers", "must be 0..%d, got %d", limits.MaxGPUsPerHost, h.Workers)
		}
		errs.CheckOptional(p+".allreduce_bus_gbyte_per_s", limits.BusGBytePerS, h.AllReduceBusGBytePerS)
		for j, s := range h.GEMM {
			q := fmt.Sprintf("%s.gemm[%d]", p, j)
			if !slices.Contains(measuredPrecisions, s.Precision) && s.Precision != "fp8" {
				errs.Add(q+".precision", "must be bf16, fp16, fp8 or fp32, got %q", s.Precision)
			}
			if s.M <= 0 || s.N <= 0 || s.K <= 0 {
				errs.Add(q, "m, n and k must be > 0, got %d x %d x %d", s.M, s.N, s.K)
			}
			errs.Check(q+".tflops", limits.TFLOPS, s.TFLOPS)
		}
	}
}

// MeasuredScale is how much faster than the cost model a host's GEMMs ran:
// the median over its samples of the preferred precision of measured /
// modelled rate. ok is false when the host has no usable sample.
func MeasuredScale(g gpu.Spec, h HostCompute) (scale float64, samples int, ok bool) {
	for _, prec := range measuredPrecisions {
		var r []float64
		for _, s := range h.GEMM {
			if s.Precision != prec {
				continue
			}
			if model := gpu.ModelGEMMTFLOPS(g, float64(s.M), float64(s.N), float64(s.K)); model > 0 {
				r = append(r, s.TFLOPS/model)
			}
		}
		if len(r) > 0 {
			return stats.Median(r), len(r), true
		}
	}
	return 0, 0, false
}

// applyMeasuredCompute sets each island's compute rate and intra-host bus
// from its measured hosts: the median over those hosts, so that an island
// stays one cost class (hosts of one island are identical by definition;
// islands that measured differently get layer splits from their speed).
func (f *File) applyMeasuredCompute(islands []Island, hosts []Host) {
	if f.MeasuredCompute == nil {
		return
	}
	byHost := map[string]HostCompute{}
	for _, h := range f.MeasuredCompute.Hosts {
		byHost[h.Host] = h
	}
	for _, isl := range islands {
		var scales, allReduce []float64
		for _, hi := range isl.Hosts {
			mc, ok := byHost[hosts[hi].Name]
			if !ok {
				continue
			}
			if s, _, ok := MeasuredScale(hosts[hi].GPU, mc); ok {
				scales = append(scales, s)
			}
			if mc.AllReduceBusGBytePerS > 0 {
				allReduce = append(allReduce, mc.AllReduceBusGBytePerS*1e9)
			}
		}
		for _, hi := range isl.Hosts {
			if len(scales) > 0 {
				scaleCompute(&hosts[hi].GPU, stats.Median(scales))
			}
			if len(allReduce) > 0 {
				hosts[hi].IntraBytesPerS = stats.Median(allReduce)
			}
		}
	}
}

// scaleCompute makes g's tensor-core work s times faster, FP8 GEMMs
// included (a calibration's compute factor fitted on FP8 runs must move
// their GEMMs too).
func scaleCompute(g *gpu.Spec, s float64) {
	g.PeakTFLOPS = gpu.PeakFLOPS(*g) / 1e12 * s
	g.PeakFP32TFLOPS *= s
	g.PeakFP8TFLOPS *= s
}
