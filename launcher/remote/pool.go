package remote

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-multierror"
)

// DefaultFanout is how many hosts are dialled or driven at once (--fanout).
const DefaultFanout = 64

// Pool holds one connection per host, dialled with bounded concurrency and
// reused for probing, uploads and starting ranks.
type Pool struct {
	Opts   SSHOptions
	Fanout int

	mu    sync.Mutex
	conns map[string]*Conn
	// standbys are sessions standing by on a connection for the job's
	// agent (RunStandingBy): the launch probe leaves them, the launch takes
	// them, Close ends those left.
	standbys map[string]*Standby
}

// NewPool returns an empty pool; fanout <= 0 means DefaultFanout.
func NewPool(opts SSHOptions, fanout int) *Pool {
	if fanout <= 0 {
		fanout = DefaultFanout
	}
	return &Pool{Opts: opts, Fanout: fanout, conns: map[string]*Conn{}, standbys: map[string]*Standby{}}
}

// poolKey identifies a host in the pool.
func poolKey(t HostTarget) string { return t.String() }

// Conn returns the open connection to t, or nil.
func (p *Pool) Conn(t HostTarget) *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[poolKey(t)]
	if c != nil && c.Err() != nil {
		return nil
	}
	return c
}

// DialAll connects to every target not yet connected. The error, if any, is
// a *HostErrors naming each host that failed; hosts that succeeded stay in
// the pool.
func (p *Pool) DialAll(ctx context.Context, targets []HostTarget) error {
	return p.Each(ctx, targets, func(ctx context.Context, t HostTarget) error {
		if p.Conn(t) != nil {
			return nil
		}
		c, err := Dial(ctx, t, p.Opts)
		if err != nil {
			return err
		}
		p.mu.Lock()
		if old := p.conns[poolKey(t)]; old != nil {
			old.Close()
		}
		p.conns[poolKey(t)] = c
		p.mu.Unlock()
		return nil
	})
}

// Each runs fn for every target, at most Fanout at once, and collects the
// failures per host (a *HostErrors, nil when all succeed).
func (p *Pool) Each(ctx context.Context, targets []HostTarget, fn func(ctx context.Context, t HostTarget) error) error {
	fanout := p.Fanout
	if fanout <= 0 {
		fanout = DefaultFanout
	}
	sem := make(chan struct{}, fanout)
	var mu sync.Mutex
	errs := &HostErrors{}
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, t); err != nil {
				mu.Lock()
				errs.Add(ErrorName(t), err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs.ErrorOrNil()
}

// errorName names a host in errors: its name, with its port when it has
// one of its own (two containers behind one address are two hosts).
func ErrorName(t HostTarget) string {
	if t.Port != 0 {
		return HostTarget{Name: t.Name, Port: t.Port}.String()
	}
	return t.Name
}

// RunStandingBy runs cmd on t as Conn.Run does, in a session that then
// stands by in the pool for the next command there (TakeStandby, Then);
// when t has one already, in a session of its own.
func (p *Pool) RunStandingBy(ctx context.Context, t HostTarget, cmd string) (stdout, stderr []byte, err error) {
	c := p.Conn(t)
	if c == nil {
		return nil, nil, fmt.Errorf("not connected")
	}
	p.mu.Lock()
	_, has := p.standbys[poolKey(t)]
	p.mu.Unlock()
	if has {
		return c.Run(ctx, cmd)
	}
	stdout, stderr, s, err := c.runStandingBy(ctx, cmd)
	if s != nil {
		p.mu.Lock()
		p.standbys[poolKey(t)] = s
		p.mu.Unlock()
	}
	return stdout, stderr, err
}

// TakeStandby returns t's standby (RunStandingBy) and forgets it, or nil.
func (p *Pool) TakeStandby(t HostTarget) *Standby {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.standbys[poolKey(t)]
	delete(p.standbys, poolKey(t))
	return s
}

// Close closes every connection and the standbys left.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.standbys {
		s.Close()
		delete(p.standbys, k)
	}
	for k, c := range p.conns {
		c.Close()
		delete(p.conns, k)
	}
	return nil
}

// HostError is one host's failure.
type HostError struct {
	Host string
	Err  error
}

func (e *HostError) Error() string { return e.Host + ": " + e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// HostErrors collects failures from many hosts. Its message lists them
// sorted by host, folding hosts with the identical error into one line:
// "node1, node3: connect: connection refused".
type HostErrors struct {
	Errs []*HostError
}

// Add records err for host.
func (h *HostErrors) Add(host string, err error) {
	h.Errs = append(h.Errs, &HostError{Host: host, Err: err})
}

// ErrorOrNil returns h as an error, or nil when it holds none.
func (h *HostErrors) ErrorOrNil() error {
	if h == nil || len(h.Errs) == 0 {
		return nil
	}
	return h
}

// Multi returns the grouped errors as a go-multierror, one entry per
// distinct message, sorted by first host.
func (h *HostErrors) Multi() *multierror.Error {
	sorted := append([]*HostError(nil), h.Errs...)
	sort.SliceStable(sorted, func(i, j int) bool { return hostLess(sorted[i].Host, sorted[j].Host) })
	type group struct {
		hosts []string
		err   error
	}
	var groups []*group
	byMsg := map[string]*group{}
	for _, e := range sorted {
		msg := e.Err.Error()
		g := byMsg[msg]
		if g == nil {
			g = &group{err: e.Err}
			byMsg[msg] = g
			groups = append(groups, g)
		}
		g.hosts = append(g.hosts, e.Host)
	}
	m := &multierror.Error{ErrorFormat: formatHostErrors}
	for _, g := range groups {
		m = multierror.Append(m, &HostError{Host: strings.Join(g.hosts, ", "), Err: g.err})
	}
	return m
}

func formatHostErrors(es []error) string {
	if len(es) == 1 {
		return es[0].Error()
	}
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = "  " + e.Error()
	}
	return fmt.Sprintf("%d distinct errors:\n%s", len(es), strings.Join(lines, "\n"))
}

func (h *HostErrors) Error() string { return h.Multi().Error() }

// Unwrap lets errors.Is/As see every host's error.
func (h *HostErrors) Unwrap() []error {
	out := make([]error, len(h.Errs))
	for i, e := range h.Errs {
		out[i] = e
	}
	return out
}

// Hosts returns the hosts that failed, sorted.
func (h *HostErrors) Hosts() []string {
	var out []string
	for _, e := range h.Errs {
		out = append(out, e.Host)
	}
	sort.Slice(out, func(i, j int) bool { return hostLess(out[i], out[j]) })
	return out
}

// hostLess orders host names naturally so node2 sorts before node10.
func hostLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
