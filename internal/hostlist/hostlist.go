// Package hostlist expands Slurm-style host list expressions such as
// "node[01-16,20],gpu-a[1-2]" into host names, keeping their order.
package hostlist

import (
	"fmt"
	"strconv"
	"strings"
)

// maxHosts bounds expansion so a typo like node[1-99999999] fails fast
// instead of exhausting memory.
const maxHosts = 1 << 20

// Expand returns the hosts named by expr, in order. Commas at bracket depth
// zero separate items; each item may hold several bracket groups, which
// expand as a cartesian product (left group varies slowest), as in Slurm.
func Expand(expr string) ([]string, error) {
	items, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		hosts, err := expandItem(item)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", expr, err)
		}
		out = append(out, hosts...)
		if len(out) > maxHosts {
			return nil, fmt.Errorf("host list %q: more than %d hosts", expr, maxHosts)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("host list %q names no hosts", expr)
	}
	return out, nil
}

func splitTop(expr string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	for i, r := range expr {
		switch r {
		case '[':
			depth++
			if depth > 1 {
				return nil, fmt.Errorf("host list %q: nested '[' at offset %d", expr, i)
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("host list %q: unmatched ']' at offset %d", expr, i)
			}
		case ',':
			if depth == 0 {
				items = append(items, expr[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("host list %q: unclosed '['", expr)
	}
	return append(items, expr[start:]), nil
}

func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsAny(item, "] \t") {
			return nil, fmt.Errorf("bad host name %q", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("unclosed '[' in %q", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	values, err := expandRanges(body)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", item, err)
	}
	tails, err := expandItem(rest)
	if rest == "" {
		tails, err = []string{""}, nil
	}
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(values)*len(tails))
	for _, v := range values {
		for _, t := range tails {
			out = append(out, prefix+v+t)
		}
	}
	return out, nil
}

// expandRanges turns "01-03,7" into ["01","02","03","7"], keeping the
// zero-padding width of the range's lower bound as Slurm does.
func expandRanges(body string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil || a < 0 || b < 0 {
			return nil, fmt.Errorf("bad range %q (want N or N-M with digits)", part)
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", part)
		}
		if b-a+1 > maxHosts {
			return nil, fmt.Errorf("range %q has more than %d hosts", part, maxHosts)
		}
		width := len(lo)
		for v := a; v <= b; v++ {
			out = append(out, fmt.Sprintf("%0*d", width, v))
		}
	}
	return out, nil
}
