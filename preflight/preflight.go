// Package preflight reads what a preflight job's ranks report (see
// templates.Preflight and templates/site/pipette_preflight.py) and judges
// it: every group connected and ran its collective within the timeout, and
// on NCCL reached a share of the bandwidth the plan assumed.
package preflight

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/templates"
)

// Mark starts every result line a preflight rank prints.
const Mark = "::pipette-preflight::"

// Event is one result line.
type Event struct {
	Event   string    `json:"event"` // start, group, pair, hang, done
	ID      string    `json:"id"`
	Rank    int       `json:"rank"`
	OK      bool      `json:"ok"`
	Error   string    `json:"error"`
	Seconds []float64 `json:"seconds"`
	Backend string    `json:"backend"`
	Hosts   []string  `json:"hosts"`
	What    string    `json:"what"`
	// Elapsed is how long the member spent on the group, failure included.
	Elapsed float64 `json:"elapsed"`
}

// Collector is the launcher's output writer: it keeps the result lines of
// "host:rank: line" output and the last other lines.
type Collector struct {
	mu     sync.Mutex
	buf    []byte
	events []Event
	other  []string
}

func (c *Collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		c.line(string(c.buf[:i]))
		c.buf = c.buf[i+1:]
	}
}

func (c *Collector) line(l string) {
	i := strings.Index(l, Mark)
	if i < 0 {
		c.other = append(c.other, l)
		if len(c.other) > 40 {
			c.other = c.other[len(c.other)-40:]
		}
		return
	}
	var e Event
	if json.Unmarshal([]byte(strings.TrimSpace(l[i+len(Mark):])), &e) == nil {
		c.events = append(c.events, e)
	}
}

// Events returns the result lines read so far.
func (c *Collector) Events() []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// Other returns the last lines that were not results (errors, tracebacks).
func (c *Collector) Other() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.other)
}

// GroupResult is one group's verdict.
type GroupResult struct {
	templates.PreflightGroup
	// Status: ok, failed (a member reported an error or timeout), short
	// (NCCL below MinShare of the plan), missing (a member never reported).
	Status string
	Error  string
	// MeasuredBytesPerS is the bus bandwidth of an all-reduce (2(n-1)/n of
	// the bytes per second) or the one-way rate of a send/recv, from the
	// slowest member's median time.
	MeasuredBytesPerS float64
	// BrokenPairs are host pairs of a failed group that did not connect.
	BrokenPairs []string
}

// Report is the whole preflight's verdict.
type Report struct {
	Groups  []GroupResult
	Backend string
	// Failed is the first failing group in test order, nil when all pass.
	Failed *GroupResult
	Reason string
}

// Evaluate judges the events against the spec. minShare applies to NCCL
// only: gloo's all-reduce runs on the CPU and says little about the fabric.
func Evaluate(spec *templates.PreflightSpec, events []Event, minShare float64) Report {
	byGroup := map[string][]Event{}
	pairs := map[string][]Event{}
	hung := map[int]string{}
	rep := Report{}
	for _, e := range events {
		switch e.Event {
		case "start":
			if rep.Backend == "" {
				rep.Backend = e.Backend
			}
		case "group":
			byGroup[e.ID] = append(byGroup[e.ID], e)
			if rep.Backend == "" {
				rep.Backend = e.Backend
			}
		case "pair":
			pairs[e.ID] = append(pairs[e.ID], e)
		case "hang":
			hung[e.Rank] = e.What
		}
	}
	var failures []string
	for _, ph := range spec.Phases {
		for _, g := range ph.Groups {
			r := judge(spec, g, byGroup[g.ID], pairs[g.ID], hung, rep.Backend, minShare)
			rep.Groups = append(rep.Groups, r)
			if r.Status != "ok" {
				failures = append(failures, describe(r))
			}
		}
	}
	for i := range rep.Groups {
		if rep.Groups[i].Status != "ok" {
			rep.Failed = &rep.Groups[i]
			break
		}
	}
	if len(failures) > 0 {
		rep.Reason = failures[0]
		if len(failures) > 1 {
			rep.Reason += fmt.Sprintf(" (and %d more failing group(s), listed above)", len(failures)-1)
		}
	}
	return rep
}

func judge(spec *templates.PreflightSpec, g templates.PreflightGroup, evs, pairEvs []Event, hung map[int]string, backend string, minShare float64) GroupResult {
	r := GroupResult{PreflightGroup: g, Status: "ok"}
	seen := map[int]bool{}
	slowest := 0.0
	for _, e := range evs {
		seen[e.Rank] = true
		if !e.OK {
			if r.Status == "ok" || strings.Contains(r.Error, "Timeout") && !strings.Contains(e.Error, "Timeout") {
				r.Error = fmt.Sprintf("rank %d after %.1fs: %s", e.Rank, e.Elapsed, e.Error)
			}
			r.Status = "failed"
			continue
		}
		if len(e.Seconds) > 0 {
			slowest = max(slowest, stats.Median(e.Seconds))
		}
	}
	for _, rank := range g.Ranks {
		if !seen[rank] && r.Status == "ok" {
			r.Status = "missing"
			r.Error = fmt.Sprintf("rank %d never reported", rank)
			if what, ok := hung[rank]; ok {
				r.Error += " (stuck in " + what + ")"
			}
		}
	}
	broken := map[string]string{} // both ends report; keep one error, the more telling
	for _, e := range pairEvs {
		if !e.OK && len(e.Hosts) == 2 {
			k := e.Hosts[0] + " <-> " + e.Hosts[1]
			if prev, ok := broken[k]; !ok || strings.HasPrefix(prev, "no answer") || strings.Contains(prev, "no progress") {
				broken[k] = e.Error
			}
		}
	}
	for k, e := range broken {
		r.BrokenPairs = append(r.BrokenPairs, k+" ("+e+")")
	}
	sort.Strings(r.BrokenPairs)
	if r.Status == "ok" && slowest > 0 {
		b := float64(spec.Bytes)
		if g.Op == "allreduce" {
			n := float64(len(g.Ranks))
			b *= 2 * (n - 1) / n
		}
		r.MeasuredBytesPerS = b / slowest
		if backend == "nccl" && minShare > 0 && g.AssumedBytesPerS > 0 && r.MeasuredBytesPerS < minShare*g.AssumedBytesPerS {
			r.Status = "short"
			r.Error = fmt.Sprintf("%.2f GB/s, under %.0f%% of the plan's %.2f GB/s", r.MeasuredBytesPerS/1e9, 100*minShare, g.AssumedBytesPerS/1e9)
		}
	}
	return r
}

func uniqueHosts(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

func describe(r GroupResult) string {
	s := fmt.Sprintf("%s group %s (ranks %s on %s, %s) %s: %s", r.Type, r.ID, intList(r.Ranks), strings.Join(uniqueHosts(r.Hosts), ","), r.Transport, verb(r.Status), r.Error)
	if len(r.BrokenPairs) > 0 {
		s += "; link(s) that do not connect: " + strings.Join(r.BrokenPairs, "; ")
	}
	return s
}

func verb(status string) string {
	switch status {
	case "short":
		return "falls short"
	case "missing":
		return "did not finish"
	}
	return "failed"
}

func intList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Write prints the per-group table and the verdict.
func (rep Report) Write(w io.Writer, spec *templates.PreflightSpec) {
	note := ""
	if rep.Backend == "gloo" {
		note = " (gloo on CPU: bandwidth reported, not judged)"
	}
	fmt.Fprintf(w, "preflight: %s, %d MiB per operation, every connection and operation limited to %gs%s\n",
		orUnknown(rep.Backend), spec.Bytes>>20, spec.TimeoutS, note)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tGROUP\tRANKS\tHOSTS\tTRANSPORT\tMEASURED GB/s\tPLAN GB/s\tSTATUS")
	for _, r := range rep.Groups {
		meas := "-"
		if r.MeasuredBytesPerS > 0 {
			meas = fmt.Sprintf("%.3f", r.MeasuredBytesPerS/1e9)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", r.Type, r.ID, intList(r.Ranks), strings.Join(uniqueHosts(r.Hosts), ","),
			r.Transport, meas, r.AssumedBytesPerS/1e9, r.Status)
	}
	tw.Flush()
	switch {
	case rep.Failed == nil && len(spec.Phases) == 0:
		// One rank (or none sharing a group): nothing crosses a link.
		fmt.Fprintln(w, "preflight passed: no group or pipeline link has more than one rank, so there is no link to prove")
		return
	case rep.Failed == nil:
		fmt.Fprintln(w, "preflight passed: every group connected and ran its collective")
		return
	}
	fmt.Fprintf(w, "preflight FAILED: %s\n", rep.Reason)
}

func orUnknown(s string) string {
	if s == "" {
		return "backend unknown (no rank reported)"
	}
	return s
}
