package measure

import (
	"fmt"
	"io"
	"regexp"
	"strconv"

	"github.com/pipette-launch/pipette-launch/internal/lines"
	"github.com/pipette-launch/pipette-launch/internal/stats"
)

// Iteration-time lines a training job prints, as the frameworks write them:
//
//	Megatron-LM / Megatron-DeepSpeed (training.py training_log):
//	  " iteration      122/  250000 | consumed samples: ... | elapsed time per iteration (ms): 86545.2 | ..."
//	DeepSpeed's ThroughputTimer (deepspeed/utils/timer.py), three generations:
//	  "[timer.py:258:stop] epoch=0/micro_step=4500/global_step=4500, RunningAvgSamplesPerSec=16.12, CurrSamplesPerSec=16.80, ..."
//	  "[timer.py:197:stop] 0/17, RunningAvgSamplesPerSec=158.31, CurrSamplesPerSec=159.62, ..."
//	  "[timer.py:189:stop] 0/40, SamplesPerSec=83.48, MemAllocated=0.26GB, ..."
//
// Samples per second are the whole job's (the timer counts the global batch,
// or the micro-batch times the data-parallel size per micro-step), so one
// iteration of the global batch takes global_batch / rate.
var (
	megatronIterRe = regexp.MustCompile(`elapsed time per iteration \(ms\):\s*([0-9.]+(?:[eE][-+]?[0-9]+)?)`)
	dsCurrRe       = regexp.MustCompile(`\bCurrSamplesPerSec=([0-9.]+(?:[eE][-+]?[0-9]+)?)`)
	dsOldRe        = regexp.MustCompile(`[\s,]SamplesPerSec=([0-9.]+(?:[eE][-+]?[0-9]+)?)`)
)

// Iteration-log formats.
const (
	FormatMegatron  = "megatron"  // elapsed time per iteration (ms)
	FormatDeepSpeed = "deepspeed" // ThroughputTimer samples/s
)

// IterationLog is what one log gave.
type IterationLog struct {
	Format string
	// Seconds per iteration, in log order, warm-up iterations removed.
	Seconds []float64
	// Skipped is how many leading iterations were dropped as warm-up.
	Skipped int
}

// maxLogLine bounds the part of a log line that is searched for an
// iteration time.
const maxLogLine = 64 << 10

// ParseIterationLog reads iteration times from a job's output. Megatron's
// own line wins when a line has both (Megatron-DeepSpeed prints samples/sec
// beside it). DeepSpeed's rates need globalBatch (sequences per
// iteration); without it they are an error. The first skip iterations
// (start-up, allocator warm-up, compilation) are dropped.
func ParseIterationLog(r io.Reader, globalBatch, skip int) (IterationLog, error) {
	var meg, ds []float64
	// Iteration lines are short; a longer line (a printed tensor, a
	// progress bar) is cut rather than ending the read.
	err := lines.Each(r, maxLogLine, func(b []byte, _ int64) {
		line := string(b)
		if m := megatronIterRe.FindStringSubmatch(line); m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > 0 {
				meg = append(meg, v/1000)
			}
			return
		}
		m := dsCurrRe.FindStringSubmatch(line)
		if m == nil {
			m = dsOldRe.FindStringSubmatch(line)
		}
		if m != nil {
			if v, err := strconv.ParseFloat(m[1], 64); err == nil && v > 0 {
				ds = append(ds, v)
			}
		}
	})
	if err != nil {
		return IterationLog{}, err
	}
	out := IterationLog{Format: FormatMegatron, Seconds: meg}
	if len(meg) == 0 && len(ds) > 0 {
		if globalBatch <= 0 {
			return IterationLog{}, fmt.Errorf("DeepSpeed throughput lines give samples/s: pass --global-batch-size (train_batch_size) to turn them into iteration times")
		}
		out.Format = FormatDeepSpeed
		for _, v := range ds {
			out.Seconds = append(out.Seconds, float64(globalBatch)/v)
		}
	}
	if len(out.Seconds) == 0 {
		return IterationLog{}, fmt.Errorf("no iteration times found (want Megatron's \"elapsed time per iteration (ms)\" or DeepSpeed's \"CurrSamplesPerSec=\" lines)")
	}
	out.Skipped = min(skip, len(out.Seconds)-1)
	out.Seconds = out.Seconds[out.Skipped:]
	return out, nil
}

// MedianSeconds is the median iteration time: robust to the odd slow
// iteration (checkpointing, evaluation) that a mean would absorb.
func (l IterationLog) MedianSeconds() float64 {
	return stats.Median(l.Seconds)
}
