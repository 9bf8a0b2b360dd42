package elastic

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Iteration lines, as the frameworks print them with the step the job
// reached (restored from its checkpoint on a restart):
//
//	Megatron-LM core_v0.19.0 (megatron/training/training.py, training_log):
//	  " iteration      122/  250000 | consumed samples: ..."
//	  (examples/torch_elastic.py prints "iteration 5/16 world 6", the same form)
//	DeepSpeed v0.14.4 (deepspeed/runtime/engine.py, _report_progress, every steps_per_print):
//	  "[Rank 0] step=10, skipped=0, lr=[0.001], mom=[(0.9, 0.999)]"
//
// DeepSpeed's ThroughputTimer line ("global_step=...") is not one: it
// counts the steps of this process, from 0 again after a restart. Nor is
// DeepSpeed's "step=0, skipped=": the engine's __init__ reports progress 0
// (engine.py line 308) before the job loads its checkpoint, while a step
// reports global_steps + 1 (line 2117), never 0.
var stepLineRes = []*regexp.Regexp{
	regexp.MustCompile(`\biteration\s+(\d+)\s*/\s*\d+`),
	regexp.MustCompile(`\bstep=([1-9]\d*), skipped=`),
}

// maxStepLine bounds the part of an output line searched for a step (and
// buffered while its end has not come).
const maxStepLine = 4 << 10

// StepWatch passes a job's output on to the writer it wraps and reads the
// steps its iteration lines name, attempt by attempt, for the summary: when
// an attempt's first step came (the recovery's end) and which steps it did
// again (its first step against the last step the attempt before reached).
// Give it to each attempt's launch as its output (launch.Options.Out) and
// to Run (Options.Steps).
type StepWatch struct {
	out io.Writer
	now func() time.Time

	mu      sync.Mutex
	partial []byte // a line whose end has not come yet
	steps   Steps
}

// Steps are the steps one attempt's iteration lines named: First, the
// first line's, at FirstAt (our clock); Last, the highest. -1 when the
// attempt printed no iteration line.
type Steps struct {
	First, Last int
	FirstAt     time.Time
}

// NewStepWatch wraps out (the job's output stream).
func NewStepWatch(out io.Writer) *StepWatch {
	return &StepWatch{out: out, now: time.Now, steps: Steps{First: -1, Last: -1}}
}

// Write passes p on and reads the complete lines in it.
func (w *StepWatch) Write(p []byte) (int, error) {
	n, err := w.out.Write(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	rest := p[:n]
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			room := max(0, maxStepLine-len(w.partial))
			w.partial = append(w.partial, rest[:min(len(rest), room)]...)
			return n, err
		}
		w.readLine(append(w.partial, rest[:min(i, maxStepLine)]...))
		w.partial = w.partial[:0]
		rest = rest[i+1:]
	}
}

func (w *StepWatch) readLine(line []byte) {
	step, ok := lineStep(line)
	if !ok {
		return
	}
	if w.steps.First < 0 {
		w.steps.First, w.steps.FirstAt = step, w.now()
	}
	w.steps.Last = max(w.steps.Last, step)
}

// lineStep is the step an iteration line names.
func lineStep(line []byte) (int, bool) {
	for _, re := range stepLineRes {
		if m := re.FindSubmatch(line); m != nil {
			if n, err := strconv.Atoi(string(m[1])); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}

// next returns the steps seen since the last call (the attempt that just
// ended) and starts afresh for the next attempt. Nil-safe.
func (w *StepWatch) next() Steps {
	if w == nil {
		return Steps{First: -1, Last: -1}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.steps
	w.steps, w.partial = Steps{First: -1, Last: -1}, w.partial[:0]
	return s
}
