package launcher

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-multierror"
)

// HostProbe is what one host reported.
type HostProbe struct {
	// Target is the host as the user named it (hostlist entry); Hostname is
	// what the host calls itself.
	Target   string `json:"target"`
	Hostname string `json:"hostname"`
	// Addr is the IPv4 address other hosts reach this one on.
	Addr        string    `json:"addr"`
	GPUs        []GPU     `json:"gpus,omitempty"`
	NICs        []NIC     `json:"nics,omitempty"`
	MemoryBytes int64     `json:"memory_bytes"`
	CPUCores    int       `json:"cpu_cores"`
	Topology    *Topology `json:"-"`
	// Warnings are things that did not stop the probe (nvidia-smi failing).
	Warnings []string `json:"warnings,omitempty"`
}

// Runner runs one command line on a host and returns its output; the SSH
// pool's connections satisfy it.
type Runner interface {
	Run(ctx context.Context, cmd string) (stdout, stderr []byte, err error)
}

// DialFunc returns the Runner for a host target (usually a pooled SSH
// connection).
type DialFunc func(ctx context.Context, target string) (Runner, error)

// ProbeHost runs the probe command on one host and parses its output.
func ProbeHost(ctx context.Context, target string, r Runner) (*HostProbe, error) {
	stdout, stderr, err := r.Run(ctx, ProbeCommand())
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w%s", target, err, stderrSuffix(stderr))
	}
	hp, err := ParseProbeOutput(string(stdout))
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w%s", target, err, stderrSuffix(stderr))
	}
	hp.Target = target
	return hp, nil
}

func stderrSuffix(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if s == "" {
		return ""
	}
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return " (stderr: " + s + ")"
}

// ProbeAll probes every target with at most fanout hosts at once (fanout <=
// 0 means all at once). Results keep the targets' order; failed hosts are
// nil and named in the returned error, one line per host, sorted.
func ProbeAll(ctx context.Context, targets []string, dial DialFunc, fanout int, progress *Progress) ([]*HostProbe, error) {
	if fanout <= 0 || fanout > len(targets) {
		fanout = len(targets)
	}
	results := make([]*HostProbe, len(targets))
	errs := make([]error, len(targets))
	sem := make(chan struct{}, max(fanout, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = probeOne(ctx, t, dial)
			mu.Lock()
			done++
			progress.Update("probe: %d/%d hosts", done, len(targets))
			mu.Unlock()
		}()
	}
	wg.Wait()
	progress.Done()
	return results, collectErrors(errs)
}

func probeOne(ctx context.Context, target string, dial DialFunc) (*HostProbe, error) {
	r, err := dial(ctx, target)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", target, err)
	}
	return ProbeHost(ctx, target, r)
}

// collectErrors joins per-host errors sorted by text, identical ones once.
func collectErrors(errs []error) error {
	seen := map[string]bool{}
	var msgs []string
	var uniq []error
	for _, e := range errs {
		if e == nil || seen[e.Error()] {
			continue
		}
		seen[e.Error()] = true
		msgs = append(msgs, e.Error())
		uniq = append(uniq, e)
	}
	if len(uniq) == 0 {
		return nil
	}
	sort.Slice(uniq, func(a, b int) bool { return uniq[a].Error() < uniq[b].Error() })
	var me *multierror.Error
	me = multierror.Append(me, uniq...)
	me.ErrorFormat = func(es []error) string {
		lines := make([]string, len(es))
		for i, e := range es {
			lines[i] = e.Error()
		}
		return strings.Join(lines, "\n")
	}
	return me
}
