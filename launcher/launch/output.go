package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/internal/lines"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// output fans rank output out to the console (filtered), per-rank log
// files and a tail kept for failure summaries.
type output struct {
	job  job.Job
	opts Options

	mu    sync.Mutex
	local map[rankKey]int // rank -> local rank
	shown map[rankKey]bool
	logs  map[rankKey]*os.File
	tails map[rankKey]*lineRing
}

type rankKey struct {
	host string
	rank int
}

func newOutput(j job.Job, opts Options) *output {
	o := &output{job: j, opts: opts, local: map[rankKey]int{}, shown: map[rankKey]bool{},
		logs: map[rankKey]*os.File{}, tails: map[rankKey]*lineRing{}}
	quiet := map[int]bool{}
	for _, r := range opts.QuietRanks {
		quiet[r] = true
	}
	var filter map[int]bool
	if opts.LocalRanksFilter != nil {
		filter = map[int]bool{}
		for _, l := range opts.LocalRanksFilter {
			filter[l] = true
		}
	}
	// Hosts are named by their labels: two hosts that differ only by port
	// get their own log files and line prefixes.
	labels := job.HostLabels(j.Hosts)
	for i, h := range j.Hosts {
		for _, r := range h.Ranks {
			k := rankKey{labels[i], r.Rank}
			o.local[k] = r.LocalRank
			o.shown[k] = !quiet[r.Rank] && (filter == nil || filter[r.LocalRank])
			o.tails[k] = &lineRing{max: opts.TailLines}
		}
	}
	return o
}

// openLogs creates LogDir/<host>.<rank>.log for every rank (host: its
// label, name_port for hosts that differ only by port).
func (o *output) openLogs() error {
	if o.opts.LogDir == "" {
		return nil
	}
	// The directory is the user's own that no one else can write (made
	// 0700), so no one can plant a link or a file there meanwhile; a log of
	// an earlier run is replaced, but never through a link.
	if err := atomicfile.OwnDir(o.opts.LogDir, false); err != nil {
		return fmt.Errorf("--log-dir %w", err)
	}
	for k := range o.local {
		name := filepath.Join(o.opts.LogDir, text.SafeName(k.host)+"."+strconv.Itoa(k.rank)+".log")
		mode := os.O_CREATE | os.O_TRUNC | os.O_WRONLY | syscall.O_NOFOLLOW
		if o.opts.Restart > 0 || o.opts.Attempt > 0 {
			mode = os.O_CREATE | os.O_APPEND | os.O_WRONLY | syscall.O_NOFOLLOW // a later attempt of the same job
		}
		f, err := os.OpenFile(name, mode, 0o644)
		if errors.Is(err, syscall.ELOOP) {
			return fmt.Errorf("--log-dir: %s is a symbolic link: pipette-launch writes no log through a link; remove it or give another directory", name)
		}
		if err != nil {
			return fmt.Errorf("--log-dir: %w", err)
		}
		o.logs[k] = f
	}
	return nil
}

// logAttempt marks a restart ("restart N") or another attempt in every
// log file.
func (o *output) logAttempt(what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.logs {
		fmt.Fprintf(f, "=== pipette-launch: %s ===\n", what)
	}
	for _, t := range o.tails {
		t.reset()
	}
}

func (o *output) rankLine(host string, rank int, line string) {
	k := rankKey{host, rank}
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.tails[k]; t != nil {
		t.add(line)
	}
	if f := o.logs[k]; f != nil {
		io.WriteString(f, line+"\n")
	}
	if show, known := o.shown[k]; show || !known {
		fmt.Fprintf(o.opts.Out, "%s:%d: %s\n", host, rank, line)
	}
}

// hostLine is output from a host that belongs to no rank (agent errors).
func (o *output) hostLine(host, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.opts.Out, "%s: %s\n", host, line)
}

func (o *output) note(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.opts.Out, format+"\n", args...)
}

func (o *output) tail(host string, rank int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.tails[rankKey{host, rank}]; t != nil {
		return t.lines()
	}
	return nil
}

func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range o.logs {
		f.Close()
	}
}

// lineRing keeps the last max lines.
type lineRing struct {
	max  int
	buf  []string
	next int
	full bool
}

func (r *lineRing) add(s string) {
	if r.max <= 0 {
		return
	}
	if len(r.buf) < r.max {
		r.buf = append(r.buf, s)
		return
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % r.max
	r.full = true
}

func (r *lineRing) lines() []string {
	if !r.full {
		return append([]string(nil), r.buf...)
	}
	return append(append([]string(nil), r.buf[r.next:]...), r.buf[:r.next]...)
}

func (r *lineRing) reset() { r.buf, r.next, r.full = nil, 0, false }

// outputLines splits a stream of output (an agent's stdout or stderr)
// into lines for fn. A line over lines.Max (a printed tensor, a progress
// bar without newlines) is handed on cut, with a note of what was cut, so
// it keeps its rank prefix and memory stays bounded; Flush hands on the
// last line when the stream ends without a newline.
func outputLines(fn func(string)) *lines.Writer {
	return lines.NewWriter(lines.Max, func(line []byte, dropped int64) { fn(lines.Shown(line, dropped)) })
}

func fsMode(m uint32) os.FileMode { return os.FileMode(m).Perm() }
