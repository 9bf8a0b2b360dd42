// Package limits holds the bounds pipette-launch puts on its inputs, each
// with the reason for it, so that a typo such as node[1-99999999] or
// slots=99999999 is refused by name before anything is sized by it, and a
// number from a file or flag (a NIC rate, a TFLOP/s figure, an iteration
// time) is finite and physically sensible before any arithmetic uses it.
// docs/usage.md's "Limits" table states every bound here; TestDocsTable
// keeps the two one.
package limits

import (
	"fmt"
	"math"
	"strconv"
)

const (
	// MaxHosts bounds the hosts of one job after every host list is
	// expanded. A resolved cluster file keeps links per island pair; only a
	// measured matrix is hosts² entries, as 16-bit codes (16384 hosts:
	// 268 M pairs, 512 MB). The launcher holds an SSH session per host.
	// 16384 hosts of 8 GPUs are 131072 GPUs, beyond today's largest jobs.
	MaxHosts = 16384
	// MaxGPUsPerHost bounds gpus_per_host, hostfile slots and
	// --nproc-per-node. The largest shipping servers hold 16 GPUs; 64 leaves
	// room without letting 99999999 through.
	MaxGPUsPerHost = 64
	// MaxRanks bounds the ranks of one job (hosts x ranks per host): every
	// rank gets its own argv and environment in the rendered launch.
	MaxRanks = 65536
	// MaxNameLen bounds one host entry as written (user@name:port): DNS names
	// are at most 253 bytes.
	MaxNameLen = 300

	// Model shape bounds: well above any published model (the largest dense
	// models have ~128 layers, hidden 25600, 128 heads, 256k vocabularies),
	// low enough that parameter and memory arithmetic cannot overflow.
	MaxLayers    = 4096
	MaxHidden    = 1 << 20
	MaxHeads     = 1 << 14
	MaxSeqLength = 1 << 24
	MaxVocab     = 1 << 24
	// MaxGlobalBatch bounds --global-batch-size (and a DeepSpeed config's
	// batch sizes): the search enumerates the batch's divisors, and 2^24
	// sequences (GPT-3 trained on 1536) keeps that instant.
	MaxGlobalBatch = 1 << 24
	MaxFileBytes   = 64 << 20 // every input file read whole: cluster, model, DeepSpeed config, env, hostfile, ...
	// MaxTokenizerBytes bounds a tokenizer file read for its vocabulary
	// size: published tokenizer.json files reach ~35 MB (256k-entry
	// vocabularies with merges); 512 MiB leaves room and still stops
	// /dev/zero or a weights file given by mistake.
	MaxTokenizerBytes = 512 << 20
	MaxHostfileLine   = 4096
)

// A Range is what one kind of number read from a file or a flag may be: a
// finite value from Min to Max (below Max when Open), in Unit.
type Range struct {
	Min, Max float64
	// Open: Max itself is out of range.
	Open bool
	Unit string
}

// The ranges of the numbers pipette-launch reads, each far wider than any
// real hardware or run and narrow enough that no arithmetic on them
// overflows, underflows to zero or divides by nothing.
var (
	// LinkGbitPerS bounds network rates (NIC rate_gbit_per_s, links'
	// bandwidth_gbit_per_s, measured host-to-host rates): 1 Mbit/s to
	// 100 Tbit/s, where the fastest NIC ships at 800 Gbit/s.
	LinkGbitPerS = Range{Min: 1e-3, Max: 1e5, Unit: "Gbit/s"}
	// BusGBytePerS bounds bus and memory bandwidths in GB/s (intra-host
	// bus per GPU, measured all-reduce bus bandwidth, host DRAM): NVLink 5
	// moves 900 GB/s per GPU and direction, a server's DRAM under 1000.
	BusGBytePerS = Range{Min: 1e-3, Max: 1e5, Unit: "GB/s"}
	// TFLOPS bounds compute rates (peak_bf16_tflops and the fp8 and fp32
	// peaks, measured GEMM rates): a CPU process slot reaches ~0.1, a B200
	// 4500 in FP8.
	TFLOPS = Range{Min: 1e-4, Max: 1e5, Unit: "TFLOP/s"}
	// MemoryGiB bounds GPU and host memory: MI300X has 192 GiB, the largest
	// servers 32 TiB.
	MemoryGiB = Range{Min: 1e-3, Max: 1e5, Unit: "GiB"}
	// HBMTBytePerS bounds a GPU's memory bandwidth (B200: 8 TB/s).
	HBMTBytePerS = Range{Min: 1e-4, Max: 1e3, Unit: "TB/s"}
	// LatencyMicroseconds bounds a link's one-way latency: 1 ns to 1 s.
	LatencyMicroseconds = Range{Min: 1e-3, Max: 1e6, Unit: "us"}
	// CalibrationFactor bounds calibration factors (time multipliers): what
	// calibrate's fit clamps its factors to.
	CalibrationFactor = Range{Min: 0.05, Max: 20}
	// IterationSeconds bounds one training iteration's time, observed in a
	// log or recorded in a calibration: 1 us to 1e6 s (11.6 days).
	IterationSeconds = Range{Min: 1e-6, Max: 1e6, Unit: "s"}
	// CapacityFactor bounds a MoE layer's expert capacity factor (Megatron's
	// --moe-expert-capacity-factor; published runs use 1 to 2).
	CapacityFactor = Range{Min: 0.01, Max: 64}
	// MemoryHeadroom is the share of each GPU's memory plans leave free
	// (--memory-headroom): half or more would leave plans no room.
	MemoryHeadroom = Range{Min: 0, Max: 0.5, Open: true}
)

// String is the range as the docs and errors state it: "0.001 to 100000
// Gbit/s", "0 to below 0.5".
func (r Range) String() string {
	s := num(r.Min) + " to "
	if r.Open {
		s += "below "
	}
	s += num(r.Max)
	if r.Unit != "" {
		s += " " + r.Unit
	}
	return s
}

// num writes a bound in plain decimal (100000, 0.001), as docs do.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Contains reports whether v is finite and inside r.
func (r Range) Contains(v float64) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < r.Min || v > r.Max {
		return false
	}
	return !(r.Open && v == r.Max)
}

// Check returns nil when v is finite and inside r, else an error saying
// what is allowed and what was given ("must be a number from 0.001 to
// 100000 Gbit/s, got NaN"); the caller adds the field or flag.
func (r Range) Check(v float64) error {
	if r.Contains(v) {
		return nil
	}
	return fmt.Errorf("must be a number from %s, got %s", r, got(v))
}

// CheckOptional is Check where 0 means "not given" (the default applies).
func (r Range) CheckOptional(v float64) error {
	if v == 0 || r.Contains(v) {
		return nil
	}
	return fmt.Errorf("must be 0 (not given) or a number from %s, got %s", r, got(v))
}

func got(v float64) string {
	if math.IsNaN(v) {
		return "NaN (not a number)"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// CheckInt returns nil when v is from lo to hi, else an error saying so
// ("must be 1..16777216, got 0"); the caller adds the field or flag.
func CheckInt(v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("must be %d..%d, got %d", lo, hi, v)
	}
	return nil
}

// MaxRunIDBytes bounds --run-id (PET_RDZV_ID): it names the job's files
// directory on every host, /tmp/pipette-launch-<run-id>-<time>-<random>,
// whose last component must stay within the 255 bytes a file name may
// have (48 bytes are the prefix, time and random part), and the work
// directory /tmp/pipette-<run-id>. 128 leaves room and is far above any
// job name a person types.
const MaxRunIDBytes = 128
