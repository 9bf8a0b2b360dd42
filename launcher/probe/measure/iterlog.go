package measure

import (
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"

	"github.com/pipette-launch/pipette-launch/internal/limits"
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
//
// The value is whatever follows the label up to a space, '|' or ',', so that
// "nan", "-5" or "0" is refused by name rather than skipped.
var (
	megatronIterRe = regexp.MustCompile(`elapsed time per iteration \(ms\):\s*([^\s|,]+)`)
	dsCurrRe       = regexp.MustCompile(`\bCurrSamplesPerSec=([^\s|,]+)`)
	dsOldRe        = regexp.MustCompile(`[\s,]SamplesPerSec=([^\s|,]+)`)
)

// ErrNoIterationTimes is ParseIterationLog's error for output without
// iteration-time lines (a rank that does not log them).
var ErrNoIterationTimes = errors.New(`no iteration times found (want Megatron's "elapsed time per iteration (ms)" or DeepSpeed's "CurrSamplesPerSec=" lines)`)

// rateRange bounds a DeepSpeed samples/s figure: finite and positive; the
// iteration time it gives is then checked against limits.IterationSeconds.
var rateRange = limits.Range{Min: math.SmallestNonzeroFloat64, Max: math.MaxFloat64, Unit: "samples/s"}

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

// ParseIterationLog reads iteration times from a job's output. Megatron's
// own line wins when a line has both (Megatron-DeepSpeed prints samples/sec
// beside it). DeepSpeed's rates need globalBatch (sequences per
// iteration); without it they are an error. The first skip iterations
// (start-up, allocator warm-up, compilation) are dropped.
//
// Every value must be a number and give an iteration time inside
// limits.IterationSeconds: a bad one (nan, 0, -5, 1e30 ms) is an error
// naming its line, not a line skipped or an absurd time recorded. Output
// without such lines is ErrNoIterationTimes.
func ParseIterationLog(r io.Reader, globalBatch, skip int) (IterationLog, error) {
	var meg []float64
	var ds []dsRate
	var bad error
	ln := 0
	// Iteration lines are short; a longer line (a printed tensor, a
	// progress bar) is searched only in its first lines.Max bytes, rather
	// than ending the read.
	err := lines.Each(r, lines.Max, func(b []byte, _ int64) {
		ln++
		if bad == nil {
			bad = readIterationLine(string(b), ln, &meg, &ds)
		}
	})
	if err != nil {
		return IterationLog{}, err
	}
	if bad != nil {
		return IterationLog{}, bad
	}
	out := IterationLog{Format: FormatMegatron, Seconds: meg}
	if len(meg) == 0 && len(ds) > 0 {
		if globalBatch <= 0 {
			return IterationLog{}, fmt.Errorf("DeepSpeed throughput lines give samples/s: pass --global-batch-size (train_batch_size) to turn them into iteration times")
		}
		out.Format = FormatDeepSpeed
		for _, d := range ds {
			s := float64(globalBatch) / d.perS
			if !limits.IterationSeconds.Contains(s) {
				return IterationLog{}, fmt.Errorf("line %d: %g samples per second at a global batch of %d is an iteration of %.3g s: want an iteration time from %s", d.line, d.perS, globalBatch, s, limits.IterationSeconds)
			}
			out.Seconds = append(out.Seconds, s)
		}
	}
	if len(out.Seconds) == 0 {
		return IterationLog{}, ErrNoIterationTimes
	}
	out.Skipped = min(skip, len(out.Seconds)-1)
	out.Seconds = out.Seconds[out.Skipped:]
	return out, nil
}

// readIterationLine adds line ln's iteration time, Megatron's or
// DeepSpeed's, to meg or ds; a value that is no number or outside its
// range is an error naming the line.
func readIterationLine(line string, ln int, meg *[]float64, ds *[]dsRate) error {
	if m := megatronIterRe.FindStringSubmatch(line); m != nil {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || !limits.IterationSeconds.Contains(v/1000) {
			return fmt.Errorf("line %d: elapsed time per iteration (ms) is %s: want an iteration time from %s", ln, m[1], limits.IterationSeconds)
		}
		*meg = append(*meg, v/1000)
		return nil
	}
	m := dsCurrRe.FindStringSubmatch(line)
	if m == nil {
		m = dsOldRe.FindStringSubmatch(line)
	}
	if m != nil {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil || !rateRange.Contains(v) {
			return fmt.Errorf("line %d: samples per second is %s: want a positive number", ln, m[1])
		}
		*ds = append(*ds, dsRate{v, ln})
	}
	return nil
}

// dsRate is a DeepSpeed samples/s figure and its line.
type dsRate struct {
	perS float64
	line int
}

// MedianSeconds is the median iteration time: robust to the odd slow
// iteration (checkpointing, evaluation) that a mean would absorb.
func (l IterationLog) MedianSeconds() float64 {
	return stats.Median(l.Seconds)
}
