package report

import (
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// benchInput plans GPT-3 175B on two islands of 8-GPU hosts (H100 on
// 3.2 Tbit/s InfiniBand and A100 on 1.6 Tbit/s, joined by 400 Gbit/s).
// The search is set-up, not measured; TP and PP are fixed so it stays
// short on 2,048 hosts.
func benchInput(b *testing.B, hostsPerIsland int) Input {
	b.Helper()
	yaml := fmt.Sprintf(`
clusters:
  - name: h100
    hosts: h100-[0001-%04d]
    gpus_per_host: 8
    gpu: {model: H100-SXM5-80GB}
    intra_host: {type: nvswitch}
    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 400}]
    fabric: ib
    host_memory_gib: 2048
    cpu_cores: 112
  - name: a100
    hosts: a100-[0001-%04d]
    gpus_per_host: 8
    gpu: {model: A100-SXM4-80GB}
    intra_host: {type: nvswitch}
    nics: [{type: infiniband, count: 8, rate_gbit_per_s: 200}]
    fabric: ib
    host_memory_gib: 1024
    cpu_cores: 128
links:
  - between: [h100, a100]
    type: infiniband
    bandwidth_gbit_per_s: 400
`, hostsPerIsland, hostsPerIsland)
	f, err := cluster.Parse([]byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	mode, _ := fabric.ParseMode("auto")
	c, err := f.ResolveFor(mode.Transport())
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.Preset("gpt3-175b")
	if err != nil {
		b.Fatal(err)
	}
	gpus := 16 * hostsPerIsland
	so := search.Options{Framework: parallel.FrameworkMegatron, GlobalBatch: gpus / 8 * 12, TopK: 3, Seed: 1,
		PlacementBudget: 500 * time.Millisecond, Fixed: parallel.Constraints{TP: 8, PP: 8, ZeroStage: -1}}
	res, err := search.Search(c, m, so)
	if err != nil {
		b.Fatal(err)
	}
	return Input{Cluster: c, Model: m, Result: res, ClusterName: fmt.Sprintf("%d GPUs", gpus)}
}

// countingWriter counts the bytes of the page.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

// benchReport times building the report (timelines from the simulator,
// every figure) and writing the HTML, and reports the page's size.
func benchReport(b *testing.B, hostsPerIsland int) {
	in := benchInput(b, hostsPerIsland)
	var size int64
	var r *Report
	cpu0 := cpuSeconds()
	for b.Loop() {
		var err error
		r, err = Build(in)
		if err != nil {
			b.Fatal(err)
		}
		var w countingWriter
		if err := r.WriteHTML(&w); err != nil {
			b.Fatal(err)
		}
		size = w.n
	}
	// The development machine is shared: CPU time per report is the figure
	// that does not grow with other people's load.
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
	b.ReportMetric(float64(size)/1e6, "MB/page")
	for _, f := range r.Figures() {
		b.Logf("%s: %d kB", f.Name, len(f.SVG)/1000)
	}
}

// cpuSeconds is this process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkReport1024GPUs: 2 x 64 hosts x 8 GPUs.
func BenchmarkReport1024GPUs(b *testing.B) { benchReport(b, 64) }

// BenchmarkReport16384GPUs: 2 x 1,024 hosts x 8 GPUs.
func BenchmarkReport16384GPUs(b *testing.B) { benchReport(b, 1024) }
