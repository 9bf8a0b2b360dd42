package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// RoundRobinRounds schedules every unordered pair of n hosts into rounds of
// disjoint pairs (the circle method of a round-robin tournament): n-1 rounds
// of n/2 pairs for even n, n rounds with one host idle for odd n. Every pair
// appears exactly once; pairs are (lower index, higher index).
func RoundRobinRounds(n int) [][][2]int {
	if n < 2 {
		return nil
	}
	m := n
	if m%2 == 1 {
		m++ // index n is the "bye": its partner sits the round out
	}
	ring := make([]int, m)
	for i := range ring {
		ring[i] = i
	}
	var rounds [][][2]int
	for r := 0; r < m-1; r++ {
		var pairs [][2]int
		for i := 0; i < m/2; i++ {
			a, b := ring[i], ring[m-1-i]
			if a >= n || b >= n {
				continue
			}
			pairs = append(pairs, [2]int{min(a, b), max(a, b)})
		}
		rounds = append(rounds, pairs)
		// Keep ring[0] fixed and rotate the rest by one.
		last := ring[m-1]
		copy(ring[2:], ring[1:m-1])
		ring[1] = last
	}
	return rounds
}

// iperfResult is the part of `iperf3 -J` output the measurement reads.
type iperfResult struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
	} `json:"end"`
	Error string `json:"error"`
}

// ParseIperf3JSON returns end.sum_received.bits_per_second of `iperf3 -J` in
// Gbit/s: what the receiving side got, the rate a transfer attains.
func ParseIperf3JSON(out []byte) (float64, error) {
	var r iperfResult
	if err := json.Unmarshal(out, &r); err != nil {
		return 0, fmt.Errorf("iperf3 -J output: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	if r.End.SumReceived.BitsPerSecond <= 0 {
		return 0, fmt.Errorf("iperf3 -J output: no end.sum_received.bits_per_second")
	}
	return r.End.SumReceived.BitsPerSecond / 1e9, nil
}

// Host is a host taking part in the bandwidth measurement.
type Host struct {
	Name   string // as written in the cluster file
	Addr   string // where the other hosts reach it
	Runner remote.Runner
}

// Options tunes the measurement.
type Options struct {
	// Seconds per direction per pair (iperf3 -t); default 2.
	Seconds int
	// Port the iperf3 server listens on; default 5201.
	Port int
	// PairsAtOnce limits how many pairs of a round run together; 0 runs
	// the whole round at once. Pairs whose paths share a bottleneck (an
	// uplink between racks) split it when they run together, which is what
	// a pipeline's concurrent stage-to-stage traffic sees; 1 measures each
	// pair alone.
	PairsAtOnce int
	Progress    *progress.Line
}

// MeasureTool names the tool in MeasuredBandwidth.Tool.
const MeasureTool = "iperf3"

// Measure fills the host-to-host bandwidth matrix with iperf3: n-1 rounds
// (n for odd n) of disjoint pairs, all pairs of a round at once. Each pair
// is measured in both directions, one after the other (forward, then -R),
// because links can be asymmetric (shaped on one side, or a congested
// uplink). The diagonal stays 0.
func Measure(ctx context.Context, hosts []Host, o Options) (*cluster.MeasuredBandwidth, error) {
	if o.Seconds <= 0 {
		o.Seconds = 2
	}
	if o.Port == 0 {
		o.Port = 5201
	}
	n := len(hosts)
	m := &cluster.MeasuredBandwidth{MeasuredAt: time.Now().UTC(), Tool: MeasureTool, GbitPerS: make([][]float64, n)}
	for i, h := range hosts {
		m.Hosts = append(m.Hosts, h.Name)
		m.GbitPerS[i] = make([]float64, n)
	}
	rounds := RoundRobinRounds(n)
	errs := &remote.HostErrors{}
	for r, pairs := range rounds {
		o.Progress.Update("measure: round %d/%d (%d pairs)", r+1, len(rounds), len(pairs))
		var wg sync.WaitGroup
		roundErrs := make([]error, len(pairs))
		sem := make(chan struct{}, max(o.PairsAtOnce, len(pairs), 1))
		if o.PairsAtOnce > 0 {
			sem = make(chan struct{}, o.PairsAtOnce)
		}
		for i, p := range pairs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				a, b := hosts[p[0]], hosts[p[1]]
				ab, ba, err := measurePair(ctx, a, b, o)
				m.GbitPerS[p[0]][p[1]], m.GbitPerS[p[1]][p[0]] = ab, ba
				roundErrs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range roundErrs {
			if err != nil {
				errs.Add(hosts[pairs[i][0]].Name+"<->"+hosts[pairs[i][1]].Name, err)
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	o.Progress.Done()
	if err := errs.ErrorOrNil(); err != nil {
		return m, fmt.Errorf("measure: %w", err)
	}
	return m, nil
}

// measurePair runs an iperf3 server on b and a client on a: forward gives
// a->b, reverse (-R, b sends) gives b->a.
func measurePair(ctx context.Context, a, b Host, o Options) (ab, ba float64, err error) {
	if ab, err = iperfOnce(ctx, a, b, o, false); err != nil {
		return 0, 0, err
	}
	if ba, err = iperfOnce(ctx, a, b, o, true); err != nil {
		return ab, 0, err
	}
	return ab, ba, nil
}

// serverCommand runs a one-off iperf3 server in the foreground. -1 makes it
// exit after one test; timeout bounds it when no client ever comes, so
// nothing is left running on the host either way. (iperf3 -D would return
// before the socket listens and leave a daemon to clean up.)
func serverCommand(port, seconds int) string {
	return shellquote.Join([]string{"timeout", fmt.Sprint(seconds + 30), "iperf3", "-s", "-1", "-p", fmt.Sprint(port)})
}

func clientCommand(addr string, port, seconds int, reverse bool) string {
	args := []string{"iperf3", "-c", addr, "-p", fmt.Sprint(port), "-t", fmt.Sprint(seconds), "-J"}
	if reverse {
		args = append(args, "-R")
	}
	return shellquote.Join(args)
}

func iperfOnce(ctx context.Context, client, server Host, o Options, reverse bool) (float64, error) {
	dir := client.Name + "->" + server.Name
	if reverse {
		dir = server.Name + "->" + client.Name
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serverDone := make(chan error, 1)
	go func() {
		_, stderr, err := server.Runner.Run(sctx, serverCommand(o.Port, o.Seconds))
		if err != nil {
			err = fmt.Errorf("%w%s", err, remote.StderrSuffix(stderr))
		}
		serverDone <- err
	}()
	// The server listens a moment after its session starts: retry the
	// client while the connection is refused.
	var lastErr error
	for attempt := 0; attempt < 50; attempt++ {
		stdout, stderr, err := client.Runner.Run(ctx, clientCommand(server.Addr, o.Port, o.Seconds, reverse))
		gbit, perr := ParseIperf3JSON(stdout)
		if perr == nil {
			if serr := <-serverDone; serr != nil {
				return gbit, fmt.Errorf("%s: iperf3 server on %s: %w", dir, server.Name, serr)
			}
			return gbit, nil
		}
		lastErr = perr
		if err != nil && len(stdout) == 0 {
			// No JSON at all: iperf3 missing, or the session failed.
			lastErr = fmt.Errorf("%w%s", err, remote.StderrSuffix(stderr))
			if strings.Contains(string(stderr), "not found") {
				lastErr = fmt.Errorf("iperf3 is not installed on %s (Debian/Ubuntu: apt-get install iperf3): %w", client.Name, lastErr)
			}
		}
		if !strings.Contains(lastErr.Error(), "refused") && !strings.Contains(lastErr.Error(), "unable to connect") {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: %w", dir, ctx.Err())
		case err := <-serverDone:
			return 0, fmt.Errorf("%s: iperf3 server on %s exited early: %v", dir, server.Name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("%s: %w", dir, lastErr)
}
