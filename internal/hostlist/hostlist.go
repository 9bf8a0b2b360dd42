// Package hostlist expands Slurm-style host list expressions such as
// "node[01-16,20],gpu-a[1-2]" into host names, keeping their order.
package hostlist

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/text"
)

// Expand returns the hosts named by expr, in order. Commas at bracket depth
// zero separate items; each item may hold several bracket groups, which
// expand as a cartesian product (left group varies slowest), as in Slurm.
// A bracket group holding ':' is an IPv6 address ("[::1]:2222"), kept as
// written. The whole expression is counted before anything is expanded:
// more than limits.MaxHosts hosts, or a host entry longer than
// limits.MaxNameLen, is an error, so memory stays proportional to the
// hosts a real cluster has.
func Expand(expr string) ([]string, error) {
	items, total, err := parse(expr)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, total)
	for _, it := range items {
		out = it.expand(out)
	}
	return out, nil
}

// Count returns how many hosts expr names without expanding it.
func Count(expr string) (int, error) {
	_, total, err := parse(expr)
	return total, err
}

// item is one comma-separated entry: literal text and bracket groups.
type item struct {
	text   string
	parts  []part
	count  int
	maxLen int
}

// part is literal text (groups == nil) or one bracket group.
type part struct {
	lit    string
	ranges []numRange
}

// numRange is lo..hi printed zero-padded to width (the lower bound's).
type numRange struct{ lo, hi, width int }

func parse(expr string) ([]item, int, error) {
	texts, err := splitTop(expr)
	if err != nil {
		return nil, 0, err
	}
	var items []item
	total := 0
	for _, text := range texts {
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		it, err := parseItem(text)
		if err != nil && text != strings.TrimSpace(expr) {
			return nil, 0, fmt.Errorf("host list %q: in %q: %w", short(expr), short(text), err)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("host list %q: %w", short(expr), err)
		}
		if it.maxLen > limits.MaxNameLen {
			return nil, 0, fmt.Errorf("host list %q: %q makes host names of %d bytes; at most %d", short(expr), short(text), it.maxLen, limits.MaxNameLen)
		}
		total += it.count
		if it.count > limits.MaxHosts || total > limits.MaxHosts {
			return nil, 0, fmt.Errorf("host list %q names more than %d hosts (the limit of one job)", short(expr), limits.MaxHosts)
		}
		items = append(items, it)
	}
	if len(items) == 0 {
		return nil, 0, fmt.Errorf("host list %q names no hosts", short(expr))
	}
	return items, total, nil
}

// short keeps error messages readable when the input is huge.
func short(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:77] + "..."
}

func splitTop(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i, r := range expr {
		switch r {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("host list %q: nested '[' at offset %d", short(expr), i)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("host list %q: unmatched ']' at offset %d", short(expr), i)
			}
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("host list %q: unclosed '['", short(expr))
	}
	return append(items, expr[start:]), nil
}

func parseItem(text string) (item, error) {
	it := item{text: text, count: 1}
	rest := text
	for rest != "" {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.Contains(rest, "]") {
				return it, fmt.Errorf("unmatched ']'")
			}
			it.addLit(rest)
			break
		}
		end := strings.IndexByte(rest[open:], ']') + open // splitTop checked it is there
		body := rest[open+1 : end]
		if strings.Contains(body, ":") { // [IPv6]
			it.addLit(rest[:end+1])
			rest = rest[end+1:]
			continue
		}
		it.addLit(rest[:open])
		ranges, n, width, err := parseRanges(body)
		if err != nil {
			return it, err
		}
		it.parts = append(it.parts, part{ranges: ranges})
		it.maxLen += width
		it.count = satMul(it.count, n)
		rest = rest[end+1:]
	}
	return it, nil
}

func (it *item) addLit(s string) {
	if s == "" {
		return
	}
	it.parts = append(it.parts, part{lit: s})
	it.maxLen += len(s)
}

// satMul multiplies without overflowing: anything past the host limit is
// refused anyway.
func satMul(a, b int) int {
	const ceiling = limits.MaxHosts + 1
	if a == 0 || b == 0 {
		return 0
	}
	if a >= ceiling || b >= ceiling || a*b >= ceiling {
		return ceiling
	}
	return a * b
}

// parseRanges reads "01-03,7": the ranges, how many numbers they hold
// (saturating) and the widest number printed.
func parseRanges(body string) ([]numRange, int, int, error) {
	if body == "" {
		return nil, 0, 0, fmt.Errorf("empty brackets")
	}
	var out []numRange
	n, width := 0, 0
	for _, p := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(p, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < 0 || !text.Digits(lo) || !text.Digits(hi) {
			return nil, 0, 0, fmt.Errorf("bad range %q (want N or N-M with digits)", p)
		}
		if b < a {
			return nil, 0, 0, fmt.Errorf("range %q runs backwards", p)
		}
		if b-a >= limits.MaxHosts {
			return nil, 0, 0, fmt.Errorf("range %q names more than %d hosts (the limit of one job)", p, limits.MaxHosts)
		}
		n = min(n+b-a+1, limits.MaxHosts+1)
		width = max(width, len(lo), len(strconv.Itoa(b)))
		out = append(out, numRange{lo: a, hi: b, width: len(lo)})
	}
	return out, n, width, nil
}

// expand appends the item's hosts to out, left group varying slowest.
func (it item) expand(out []string) []string {
	prefixes := []string{""}
	for _, p := range it.parts {
		if p.ranges == nil {
			for i := range prefixes {
				prefixes[i] += p.lit
			}
			continue
		}
		next := make([]string, 0, len(prefixes)*p.size())
		for _, pre := range prefixes {
			for _, r := range p.ranges {
				for v := r.lo; v <= r.hi; v++ {
					next = append(next, fmt.Sprintf("%s%0*d", pre, r.width, v))
				}
			}
		}
		prefixes = next
	}
	return append(out, prefixes...)
}

func (p part) size() int {
	n := 0
	for _, r := range p.ranges {
		n += r.hi - r.lo + 1
	}
	return n
}
