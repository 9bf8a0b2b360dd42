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

// Checkpoint save lines, printed once a checkpoint is whole: a grow-back
// restart comes right after one (rejoin.go), so that it redoes no step.
//
//	Megatron-LM core_v0.19.0 (megatron/training/checkpointing.py, save_checkpoint's
//	iter_finalize_fn, rank 0, after the tracker file is written):
//	  "  [2026-11-29 01:02:03.456789] successfully saved checkpoint from iteration     200 to /ckpt [ t 1/1, ... ]"
//	DeepSpeed v0.14.4 (deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py,
//	commit, which engine.save_checkpoint calls on every rank once its files are written):
//	  "[Torch] Checkpoint global_step10 is ready now!"
//	examples/torch_elastic.py (rank 0, after the checkpoint file is renamed into place):
//	  "SAVED step 4"
//
// DeepSpeed's line comes from every rank, each after writing its own
// shard (ZeRO partitions its optimizer state): a save is whole once every
// rank of the attempt printed it for that tag (perRank).
var saveLines = []struct {
	re      *regexp.Regexp
	perRank bool
}{
	{re: regexp.MustCompile(`successfully saved checkpoint from iteration\s+\d+`)},
	{re: regexp.MustCompile(`\[Torch\] Checkpoint (\S+) is ready now!`), perRank: true},
	{re: regexp.MustCompile(`\bSAVED step \d+`)},
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
	// ranks is the running attempt's rank count (Begin); saves counts the
	// whole checkpoints the job saved (any attempt), lastSave is the last
	// one's line, perTag the ranks that said a per-rank save line's tag
	// is written; saved gets a value at each whole checkpoint.
	ranks    int
	saves    int
	lastSave string
	perTag   map[string]int
	saved    chan struct{}
	prog     progress // the progress watch's (hang.go)
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
	return &StepWatch{out: out, now: time.Now, steps: Steps{First: -1, Last: -1}, perTag: map[string]int{}, saved: make(chan struct{}, 1),
		prog: progress{step: -1}}
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
	w.readSave(line)
	step, ok := lineStep(line)
	w.readProgress(line, step, ok)
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

// readSave counts a checkpoint save line: a whole checkpoint signals
// saved (without waiting: one pending signal is enough).
func (w *StepWatch) readSave(line []byte) {
	for _, s := range saveLines {
		m := s.re.FindSubmatch(line)
		if m == nil {
			continue
		}
		if s.perRank {
			tag := string(m[1])
			w.perTag[tag]++
			if w.perTag[tag] < max(1, w.ranks) {
				return
			}
			delete(w.perTag, tag)
		}
		w.saves++
		w.lastSave = string(m[0])
		select {
		case w.saved <- struct{}{}:
		default:
		}
		return
	}
}

// savedSignal gets a value after each whole checkpoint; nil (never) for a
// nil watch.
func (w *StepWatch) savedSignal() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.saved
}

// lastSaved is how many whole checkpoints the job saved and the last
// one's save line. Nil-safe.
func (w *StepWatch) lastSaved() (int, string) {
	if w == nil {
		return 0, ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.saves, w.lastSave
}
