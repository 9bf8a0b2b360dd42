package measure

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/progress"
	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
)

//go:embed measure_compute.py
var computeWorkerScript string

const computeMarker = "::pipette-compute::"

// ComputeShape is one GEMM: m x k times k x n.
type ComputeShape struct{ M, N, K int }

func (s ComputeShape) flops() float64 { return 2 * float64(s.M) * float64(s.N) * float64(s.K) }

// ComputeOptions tune one host's compute sweep.
type ComputeOptions struct {
	// Python is the interpreter with torch (default python3).
	Python string
	// Workers run at once: one per GPU, or one per CPU process slot.
	Workers int
	// Threads is torch's intra-op threads per CPU worker.
	Threads int
	// CUDA sweeps on the GPUs (bf16); else on the CPU (fp32).
	CUDA   bool
	Shapes []ComputeShape
	// BudgetSeconds bounds each worker's GEMM sweep (default 3): shapes run
	// smallest first and the sweep stops before one that would overrun.
	BudgetSeconds float64
	// AllReduceBytes is the all-reduce buffer among the workers (default
	// 64 MiB on CUDA, 8 MiB on CPU); 0 workers or 1 worker skips it.
	AllReduceBytes int64
}

// computeTimeoutSlack covers torch's import and process-group start-up on
// top of the sweep's budget; the remote command is killed after it.
const computeTimeoutSlack = 120

func (o ComputeOptions) withDefaults() ComputeOptions {
	if o.Python == "" {
		o.Python = "python3"
	}
	o.Workers = max(o.Workers, 1)
	o.Threads = max(o.Threads, 1)
	if o.BudgetSeconds <= 0 {
		o.BudgetSeconds = 3
	}
	if o.AllReduceBytes == 0 {
		o.AllReduceBytes = 8 << 20
		if o.CUDA {
			o.AllReduceBytes = 64 << 20
		}
	}
	o.Shapes = slices.Clone(o.Shapes)
	sort.SliceStable(o.Shapes, func(i, j int) bool { return o.Shapes[i].flops() < o.Shapes[j].flops() })
	return o
}

func (o ComputeOptions) precisions() []string {
	if o.CUDA {
		return []string{"bf16"}
	}
	return []string{"fp32"}
}

// ComputeCommand is the remote command line: every worker of the host at
// once, under one timeout, in a private directory removed afterwards.
func ComputeCommand(o ComputeOptions) (string, error) {
	o = o.withDefaults()
	shapes := make([][3]int, len(o.Shapes))
	for i, s := range o.Shapes {
		shapes[i] = [3]int{s.M, s.N, s.K}
	}
	cfg, err := json.Marshal(map[string]any{
		"cuda": o.CUDA, "threads": o.Threads, "workers": o.Workers, "shapes": shapes,
		"precisions": o.precisions(), "budget_s": o.BudgetSeconds, "allreduce_bytes": o.AllReduceBytes,
	})
	if err != nil {
		return "", err
	}
	limit := fmt.Sprint(int(o.BudgetSeconds) + computeTimeoutSlack)
	worker := shellquote.Join([]string{"timeout", limit, o.Python, "-c", computeWorkerScript, string(cfg)})
	// Workers write to files, printed in worker order once all are done;
	// a failed worker's stderr follows its (missing) result line.
	script := `d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
i=0; pids=
while [ "$i" -lt ` + fmt.Sprint(o.Workers) + ` ]; do
  OMP_NUM_THREADS=` + fmt.Sprint(o.Threads) + ` ` + worker + ` "$i" "$d/store" >"$d/out.$i" 2>"$d/err.$i" &
  pids="$pids $!"; i=$((i+1))
done
rc=0
for p in $pids; do wait "$p" || rc=$?; done
i=0
while [ "$i" -lt ` + fmt.Sprint(o.Workers) + ` ]; do
  cat "$d/out.$i"; tail -n 20 "$d/err.$i" >&2; i=$((i+1))
done
exit $rc
`
	return "sh -c " + shellquote.Quote(script), nil
}

// computeWorkerResult is one worker's JSON line.
type computeWorkerResult struct {
	Worker                int                  `json:"worker"`
	Device                string               `json:"device"`
	Torch                 string               `json:"torch"`
	Threads               int                  `json:"threads"`
	GEMM                  []cluster.GEMMSample `json:"gemm"`
	AllReduceBusGBytePerS float64              `json:"allreduce_bus_gbyte_per_s"`
	AllReduceBytes        int64                `json:"allreduce_bytes"`
}

// ParseComputeOutput combines the workers' lines into the host's figures:
// per shape and precision the median over the workers that measured it,
// the all-reduce as rank 0 timed it. It also returns the torch version.
func ParseComputeOutput(host, out string, workers int) (cluster.HostCompute, string, error) {
	var rs []computeWorkerResult
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), computeMarker+" ")
		if !ok {
			continue
		}
		var r computeWorkerResult
		if err := json.Unmarshal([]byte(rest), &r); err != nil {
			return cluster.HostCompute{}, "", fmt.Errorf("compute sweep output: %w", err)
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return cluster.HostCompute{}, "", fmt.Errorf("compute sweep printed no result")
	}
	if len(rs) < workers {
		return cluster.HostCompute{}, "", fmt.Errorf("compute sweep: %d of %d workers reported", len(rs), workers)
	}
	hc := cluster.HostCompute{Host: host, Device: rs[0].Device, Workers: len(rs), ThreadsPerWorker: rs[0].Threads}
	if !strings.HasPrefix(hc.Device, "cpu") {
		hc.ThreadsPerWorker = 0
	}
	type key struct {
		prec    string
		m, n, k int
	}
	rates := map[key][]float64{}
	var order []key
	for _, r := range rs {
		for _, s := range r.GEMM {
			k := key{s.Precision, s.M, s.N, s.K}
			if _, seen := rates[k]; !seen {
				order = append(order, k)
			}
			rates[k] = append(rates[k], s.TFLOPS)
		}
		if r.Worker == 0 {
			hc.AllReduceBusGBytePerS, hc.AllReduceBytes = round3(r.AllReduceBusGBytePerS), r.AllReduceBytes
		}
	}
	for _, k := range order {
		hc.GEMM = append(hc.GEMM, cluster.GEMMSample{Precision: k.prec, M: k.m, N: k.n, K: k.k, TFLOPS: round4(stats.Median(rates[k]))})
	}
	if len(hc.GEMM) == 0 {
		return hc, "", fmt.Errorf("compute sweep: no GEMM finished within the budget (raise --measure-compute-seconds)")
	}
	return hc, rs[0].Torch, nil
}

// round4 keeps 4 significant digits: measurement noise is far larger.
func round4(v float64) float64 { return roundSig(v, 4) }
func round3(v float64) float64 { return roundSig(v, 3) }

func roundSig(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	var f float64
	fmt.Sscanf(fmt.Sprintf("%.*g", digits, v), "%g", &f)
	return f
}

// ComputeHost is a host taking part in the compute measurement.
type ComputeHost struct {
	Name    string
	Runner  remote.Runner
	Options ComputeOptions
}

// MeasureCompute runs every host's sweep at once (hosts are separate
// machines; on a shared test-bed machine this is also how a job's ranks
// share its CPUs) and collects the results; a failed host is named in the
// error and left out.
func MeasureCompute(ctx context.Context, hosts []ComputeHost, progress *progress.Line) (*cluster.MeasuredCompute, error) {
	mc := &cluster.MeasuredCompute{MeasuredAt: time.Now().UTC().Truncate(time.Second)}
	results := make([]*cluster.HostCompute, len(hosts))
	tools := make([]string, len(hosts))
	errs := &remote.HostErrors{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	done := 0
	progress.Update("measure compute: %d hosts", len(hosts))
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc, tool, err := measureComputeHost(ctx, h)
			mu.Lock()
			defer mu.Unlock()
			done++
			progress.Update("measure compute: %d/%d hosts", done, len(hosts))
			if err != nil {
				errs.Add(h.Name, err)
				return
			}
			results[i], tools[i] = &hc, tool
		}()
	}
	wg.Wait()
	progress.Done()
	for i, r := range results {
		if r != nil {
			mc.Hosts = append(mc.Hosts, *r)
			if mc.Tool == "" {
				mc.Tool = "torch " + tools[i] + " matmul + all_reduce"
			}
		}
	}
	if err := errs.ErrorOrNil(); err != nil {
		return mc, fmt.Errorf("measure compute: %w", err)
	}
	return mc, nil
}

func measureComputeHost(ctx context.Context, h ComputeHost) (cluster.HostCompute, string, error) {
	o := h.Options.withDefaults()
	cmd, err := ComputeCommand(o)
	if err != nil {
		return cluster.HostCompute{}, "", err
	}
	stdout, stderr, runErr := h.Runner.Run(ctx, cmd)
	hc, tool, err := ParseComputeOutput(h.Name, string(stdout), o.Workers)
	if err == nil {
		return hc, tool, nil
	}
	if runErr != nil {
		err = fmt.Errorf("%w%s", runErr, remote.StderrSuffix(stderr))
		if s := string(stderr); strings.Contains(s, "No module named 'torch'") || strings.Contains(s, "not found") {
			err = fmt.Errorf("%s cannot run torch (install torch, or pass --python PATH to an interpreter that has it): %w", o.Python, err)
		}
	}
	return hc, "", err
}

// DefaultComputeShapes are the sweep's shapes without a model: the four
// GEMMs of a decoder layer (QKV, attention output, MLP up, MLP down) at
// common hidden sizes, with tokens = 4096 on GPUs and 512 on CPUs (whose
// rates are far lower; the budget stops the sweep anyway).
func DefaultComputeShapes(cuda bool) []ComputeShape {
	if cuda {
		return layerShapes([]int{2048, 4096, 8192}, 4096, 1)
	}
	return layerShapes([]int{128, 256, 512}, 512, 1)
}

// ModelComputeShapes are the decoder-layer GEMMs of m at micro-batch 1 and
// 2 (tokens = seq_length x micro-batch), with no tensor parallelism and
// with TP over every worker of a host.
func ModelComputeShapes(m model.Model, workers int) []ComputeShape {
	var out []ComputeShape
	seen := map[ComputeShape]bool{}
	tps := []int{1}
	if workers > 1 && m.Heads%workers == 0 {
		tps = append(tps, workers)
	}
	for _, mb := range []int{1, 2} {
		for _, tp := range tps {
			for _, s := range modelLayerShapes(m, m.SeqLength*mb, tp) {
				if !seen[s] {
					seen[s] = true
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func modelLayerShapes(m model.Model, tokens, tp int) []ComputeShape {
	h, ffn := m.Hidden, m.FFN()
	kv := h / m.Heads * m.Groups()
	up := ffn
	if m.SwiGLU {
		up = 2 * ffn
	}
	return []ComputeShape{
		{tokens, (h + 2*kv) / tp, h}, // QKV
		{tokens, h, h / tp},          // attention output
		{tokens, up / tp, h},         // MLP up
		{tokens, h, ffn / tp},        // MLP down
	}
}

func layerShapes(hiddens []int, tokens, tp int) []ComputeShape {
	var out []ComputeShape
	for _, h := range hiddens {
		out = append(out, modelLayerShapes(model.Model{Hidden: h, Heads: max(h/128, 1)}, tokens, tp)...)
	}
	return out
}

// ComputeTable renders the measurement: per host the device, workers, the
// best and median GEMM rate and the all-reduce bus bandwidth.
func ComputeTable(mc *cluster.MeasuredCompute) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-28s %7s %8s %12s %12s %14s\n", "host", "device", "workers", "shapes", "median TF/s", "best TF/s", "allreduce GB/s")
	for _, h := range mc.Hosts {
		var r []float64
		best := 0.0
		for _, s := range h.GEMM {
			r = append(r, s.TFLOPS)
			best = max(best, s.TFLOPS)
		}
		ar := "-"
		if h.AllReduceBusGBytePerS > 0 {
			ar = fmt.Sprintf("%.3f", h.AllReduceBusGBytePerS)
		}
		fmt.Fprintf(&b, "%-10s %-28s %7d %8d %12.4f %12.4f %14s\n", h.Host, h.Device, h.Workers, len(h.GEMM), stats.Median(r), best, ar)
	}
	return b.String()
}
