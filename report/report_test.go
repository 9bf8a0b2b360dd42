package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// node is a generic XML element, so tests read the SVG as any XML
// consumer would.
type node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Nodes   []node     `xml:",any"`
	Text    string     `xml:",chardata"`
}

func (n *node) attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func (n *node) hasClass(c string) bool {
	for _, f := range strings.Fields(n.attr("class")) {
		if f == c {
			return true
		}
	}
	return false
}

// all returns every descendant (and n itself) with the given class.
func (n *node) all(class string) []*node {
	var out []*node
	var walk func(*node)
	walk = func(x *node) {
		if x.hasClass(class) {
			out = append(out, x)
		}
		for i := range x.Nodes {
			walk(&x.Nodes[i])
		}
	}
	walk(n)
	return out
}

func parseSVG(t *testing.T, s string) *node {
	t.Helper()
	var n node
	if err := xml.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("SVG does not parse as XML: %v\n%.400s", err, s)
	}
	if n.XMLName.Local != "svg" || n.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("root is %v, want svg in the SVG namespace", n.XMLName)
	}
	return &n
}

func floatAttr(t *testing.T, n *node, name string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(n.attr(name), 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, n.attr(name), err)
	}
	return v
}

// loadCluster resolves an example cluster file as `plan` does (auto mode).
func loadCluster(t testing.TB, path string) *cluster.Cluster {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	mode, err := fabric.ParseMode("auto")
	if err != nil {
		t.Fatal(err)
	}
	c, err := f.ResolveFor(mode.Transport())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	exampleOnce sync.Once
	exampleIn   Input
	exampleErr  error
)

// twoClusterInput is the README's example: GPT-3 6.7B on the two-island
// example cluster, with the plan that ignores islands.
func twoClusterInput(t testing.TB) Input {
	t.Helper()
	exampleOnce.Do(func() {
		c := loadCluster(t, "../examples/two-clusters.yaml")
		m, err := model.Preset("gpt3-6.7b")
		if err != nil {
			exampleErr = err
			return
		}
		so := search.Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 128, TopK: 5, Seed: 1, Fixed: parallel.Constraints{ZeroStage: -1}}
		res, err := search.Search(c, m, so)
		if err != nil {
			exampleErr = err
			return
		}
		so.IgnoreIslands, so.TopK = true, 1
		naive, err := search.Search(c, m, so)
		if err != nil {
			exampleErr = err
			return
		}
		exampleIn = Input{Cluster: c, Model: m, Result: res, Naive: &naive.Plans[0], ClusterName: "examples/two-clusters.yaml"}
	})
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return exampleIn
}

// exampleReport is twoClusterInput's report (built once: it is only read).
func exampleReport(t testing.TB) (Input, *Report) {
	t.Helper()
	in := twoClusterInput(t)
	reportOnce.Do(func() { exampleRep, exampleErr = Build(in) })
	if exampleErr != nil {
		t.Fatal(exampleErr)
	}
	return in, exampleRep
}

var (
	reportOnce sync.Once
	exampleRep *Report
)

// planOf finds the plan a section draws.
func planOf(in Input, id string) *search.Plan {
	if id == "naive" {
		return in.Naive
	}
	var k int
	if _, err := fmt.Sscanf(id, "plan%d", &k); err == nil {
		return &in.Result.Plans[k-1]
	}
	cmp := in.Result.Comparison
	if id == "offload" {
		return cmp.BestWithOffload.Plan
	}
	return cmp.BestWithoutOffload.Plan
}

func figure(t *testing.T, sec Section, kind string) *node {
	t.Helper()
	for _, f := range sec.Figures {
		if f.Name == sec.ID+"-"+kind {
			return parseSVG(t, string(f.SVG))
		}
	}
	t.Fatalf("section %s has no %s figure", sec.ID, kind)
	return nil
}

// One lane per stage; per lane as many forwards (and backwards) as
// micro-batches times virtual stages, each micro-batch of each chunk once.
func TestTimelineLanesAndBlocks(t *testing.T) {
	in, r := exampleReport(t)
	if len(r.Sections) < 3 {
		t.Fatalf("%d sections, want plan 1, two alternatives and the comparison", len(r.Sections))
	}
	sawVPP := false
	for _, sec := range r.Sections {
		p := planOf(in, sec.ID)
		svg := figure(t, sec, "timeline")
		lanes := svg.all("lane")
		if len(lanes) != p.PP {
			t.Errorf("%s: %d lanes, want PP = %d", sec.ID, len(lanes), p.PP)
		}
		v := max(p.VPP, 1)
		sawVPP = sawVPP || v > 1
		for i, lane := range lanes {
			if lane.attr("data-stage") != fmt.Sprint(i) {
				t.Errorf("%s: lane %d is stage %q", sec.ID, i, lane.attr("data-stage"))
			}
			for _, kind := range []string{"fwd", "bwd"} {
				ops := lane.all(kind)
				if len(ops) != p.NumMicroBatches*v {
					t.Errorf("%s stage %d: %d %s blocks, want %d micro-batches x %d chunks", sec.ID, i, len(ops), kind, p.NumMicroBatches, v)
				}
				seen := map[string]bool{}
				for _, op := range ops {
					k := op.attr("data-chunk") + "/" + op.attr("data-micro")
					if seen[k] {
						t.Errorf("%s stage %d: %s chunk/micro %s twice", sec.ID, i, kind, k)
					}
					seen[k] = true
					if floatAttr(t, op, "data-s") <= 0 {
						t.Errorf("%s: empty block %s", sec.ID, k)
					}
				}
			}
		}
		if p.PP > 1 && len(svg.all("transfer")) == 0 {
			t.Errorf("%s: no pipeline transfers drawn", sec.ID)
		}
		if len(svg.all("optimizer")) != 1 {
			t.Errorf("%s: %d optimizer bands, want 1", sec.ID, len(svg.all("optimizer")))
		}
	}
	if !sawVPP {
		t.Errorf("no drawn plan is interleaved; the test should cover VPP > 1")
	}
}

// Every rank appears exactly once in the placement map, on the host and
// with the stage the plan gives it.
func TestPlacementEveryRankOnce(t *testing.T) {
	in, r := exampleReport(t)
	for _, sec := range r.Sections {
		p := planOf(in, sec.ID)
		svg := figure(t, sec, "placement")
		count := map[int]int{}
		for _, host := range svg.all("host") {
			for _, g := range host.all("gpu") {
				rank, err := strconv.Atoi(g.attr("data-rank"))
				if err != nil {
					t.Fatal(err)
				}
				count[rank]++
				if rank < len(p.Placement) && p.Placement[rank].Host != host.attr("data-host") {
					t.Errorf("%s: rank %d drawn on %s, placed on %s", sec.ID, rank, host.attr("data-host"), p.Placement[rank].Host)
				}
				if want := coordOf(p, rank).stage; g.attr("data-stage") != fmt.Sprint(want) {
					t.Errorf("%s: rank %d stage %s, want %d", sec.ID, rank, g.attr("data-stage"), want)
				}
			}
		}
		checkRanksOnce(t, sec.ID, count, p.WorldSize())
		if len(in.Cluster.Islands) > 1 && len(svg.all("island-link")) != 1 {
			t.Errorf("%s: %d island links listed, want 1", sec.ID, len(svg.all("island-link")))
		}
		// Every drawn plan here runs its pipeline across both islands.
		if con := svg.all("island-connector"); len(con) != 1 || con[0].attr("data-pp") != "true" {
			t.Errorf("%s: want one drawn link between the islands, marked as carrying pipeline traffic", sec.ID)
		}
	}
}

func checkRanksOnce(t *testing.T, id string, count map[int]int, world int) {
	t.Helper()
	if len(count) != world {
		t.Errorf("%s: %d distinct ranks drawn, want %d", id, len(count), world)
	}
	for r := 0; r < world; r++ {
		if count[r] != 1 {
			t.Errorf("%s: rank %d drawn %d times", id, r, count[r])
		}
	}
}

// The peak stage's bar is the plan's memory breakdown, part by part, and
// every bar's parts sum to that stage's estimate.
func TestMemoryBarsSumToBreakdown(t *testing.T) {
	in, r := exampleReport(t)
	for _, sec := range r.Sections {
		p := planOf(in, sec.ID)
		svg := figure(t, sec, "memory")
		bars := svg.all("stage-bar")
		if len(bars) != p.PP {
			t.Fatalf("%s: %d bars, want %d", sec.ID, len(bars), p.PP)
		}
		peak := bars[p.Memory.PeakStage]
		got := map[string]float64{}
		total := 0.0
		for _, part := range peak.all("mem") {
			v := floatAttr(t, part, "data-bytes")
			got[part.attr("data-part")] += v
			total += v
		}
		b := p.Memory.Breakdown
		want := map[string]float64{"weights": b.Weights, "gradients": b.Gradients, "optimizer": b.Optimizer, "activations": b.Activations, "other": b.Other}
		for k, w := range want {
			if math.Abs(got[k]-w) > 1e-6*w+1 {
				t.Errorf("%s: peak stage %s %.0f bytes drawn, plan says %.0f", sec.ID, k, got[k], w)
			}
		}
		if math.Abs(total-p.Memory.PeakBytesPerGPU) > 1e-9*total+1 {
			t.Errorf("%s: peak bar totals %.0f, plan's peak %.0f", sec.ID, total, p.Memory.PeakBytesPerGPU)
		}
		for _, bar := range bars {
			caps := bar.all("capacity")
			if len(caps) != 1 {
				t.Errorf("%s: stage %s has %d capacity marks", sec.ID, bar.attr("data-stage"), len(caps))
			}
		}
		if len(svg.all("host-mem")) == 0 {
			t.Errorf("%s: no host memory bars", sec.ID)
		}
	}
}

// The breakdown bars sum to each plan's predicted iteration time.
func TestWhyBreakdownSumsToIteration(t *testing.T) {
	in, r := exampleReport(t)
	svg := parseSVG(t, string(r.Why.SVG))
	bars := svg.all("plan-bar")
	if len(bars) != len(r.Table) || len(bars) < len(in.Result.Plans)+1 {
		t.Fatalf("%d bars, %d table rows, %d plans", len(bars), len(r.Table), len(in.Result.Plans))
	}
	for i, bar := range bars {
		sum := 0.0
		for _, part := range bar.all("part") {
			sum += floatAttr(t, part, "data-seconds")
		}
		var p *search.Plan
		if i < len(in.Result.Plans) {
			p = &in.Result.Plans[i]
		} else if bar.attr("data-label") == "ignoring islands" {
			p = in.Naive
		}
		if p != nil && !approxEq(sum, p.Predicted.IterationSeconds, 1e-9) {
			t.Errorf("%s: parts sum to %g s, prediction %g s", bar.attr("data-label"), sum, p.Predicted.IterationSeconds)
		}
	}
}

func approxEq(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

// The page is self-contained: no scripts, nothing loaded from anywhere.
func TestHTMLSelfContained(t *testing.T) {
	_, r := exampleReport(t)
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "@import", "url(http", "src=", "https://"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if n := strings.Count(page, "http://"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("page has %d http:// references besides the SVG namespace", n)
	}
	if got, want := strings.Count(page, "<svg "), len(r.Figures()); got != want {
		t.Errorf("%d inline SVGs, want %d", got, want)
	}
	for _, s := range r.Sections {
		if !strings.Contains(page, `href="#`+s.ID+`"`) || !strings.Contains(page, `id="`+s.ID+`"`) {
			t.Errorf("no link to section %s", s.ID)
		}
	}
}

// --svg writes one parsable standalone file per figure.
func TestWriteSVGs(t *testing.T) {
	_, r := exampleReport(t)
	dir := t.TempDir()
	paths, err := r.WriteSVGs(filepath.Join(dir, "figs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(r.Figures()) {
		t.Fatalf("%d files for %d figures", len(paths), len(r.Figures()))
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, string(data))
	}
}

// Host names with markup characters stay text, and long ones are cut to
// their column.
func TestHostileAndLongHostNames(t *testing.T) {
	in := twoClusterInput(t)
	cl := *in.Cluster
	cl.Hosts = append([]cluster.Host(nil), in.Cluster.Hosts...)
	cl.Hosts[0].Name = `<script>alert("x")</script>&amp;`
	cl.Hosts[1].Name = strings.Repeat("very-long-host-name-", 8) + "01"
	p := in.Result.Plans[0]
	p.Placement = append([]search.RankPlacement(nil), p.Placement...)
	for i := range p.Placement {
		p.Placement[i].Host = cl.Hosts[p.Placement[i].HostIndex].Name
	}
	res := *in.Result
	res.Plans = []search.Plan{p}
	r, err := Build(Input{Cluster: &cl, Model: in.Model, Result: &res})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>") {
		t.Fatal("a host name became markup")
	}
	for _, f := range r.Figures() {
		svg := parseSVG(t, string(f.SVG))
		for _, h := range svg.all("host-name") {
			if w := textWidth(h.Text, fontSize); w > 200 {
				t.Errorf("host label %q is %.0f px wide, column is 200", h.Text, w)
			}
		}
	}
}

func TestWriteExampleForLooking(t *testing.T) {
	if os.Getenv("REPORT_OUT") == "" {
		t.Skip("set REPORT_OUT")
	}
	_, r := exampleReport(t)
	for _, s := range r.Sections {
		t.Log(s.ID, s.Heading)
	}
	if err := r.WriteFile(os.Getenv("REPORT_OUT")); err != nil {
		t.Fatal(err)
	}
}

func TestWriteExampleSVGsForLooking(t *testing.T) {
	if os.Getenv("REPORT_SVG") == "" {
		t.Skip("set REPORT_SVG")
	}
	_, r := exampleReport(t)
	if _, err := r.WriteSVGs(os.Getenv("REPORT_SVG")); err != nil {
		t.Fatal(err)
	}
}

// largeInput is 2 islands x 40 hosts x 8 GPUs (640 ranks, past the
// detailed map) with a measured bandwidth matrix, so the tile map and the
// grouped heat-map are drawn.
func largeInput(t *testing.T) Input {
	t.Helper()
	var b strings.Builder
	b.WriteString(`clusters:
  - {name: ib, hosts: "a[01-40]", gpus_per_host: 8, gpu: {model: A100-SXM4-80GB}, intra_host: {type: nvswitch}, nics: [{type: infiniband, count: 4, rate_gbit_per_s: 200}], fabric: x, host_memory_gib: 1024, cpu_cores: 64}
  - {name: roce, hosts: "b[01-40]", gpus_per_host: 8, gpu: {model: A100-SXM4-80GB}, intra_host: {type: nvswitch}, nics: [{type: roce, count: 2, rate_gbit_per_s: 100}], fabric: x, host_memory_gib: 1024, cpu_cores: 64}
measured:
  measured_at: 2026-01-01T00:00:00Z
  hosts: [`)
	var names []string
	for _, p := range []string{"a", "b"} {
		for i := 1; i <= 40; i++ {
			names = append(names, fmt.Sprintf("%s%02d", p, i))
		}
	}
	b.WriteString(strings.Join(names, ", ") + "]\n  gbit_per_s:\n")
	for i := range names {
		row := make([]string, len(names))
		for j := range names {
			v := 150.0 - float64((i*7+j*13)%50)
			if (i < 40) != (j < 40) {
				v = 40
			}
			if i == j {
				v = 0
			}
			row[j] = fmt.Sprint(v)
		}
		b.WriteString("    - [" + strings.Join(row, ", ") + "]\n")
	}
	f, err := cluster.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := fabric.ParseMode("auto")
	c, err := f.ResolveFor(mode.Transport())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.Preset("gpt3-6.7b")
	res, err := search.Search(c, m, search.Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 160, TopK: 1, Seed: 1,
		Fixed: parallel.Constraints{TP: 8, PP: 4, VPP: 1, ZeroStage: -1}})
	if err != nil {
		t.Fatal(err)
	}
	return Input{Cluster: c, Model: m, Result: res, Measured: f.Measured != nil, Alternatives: 1}
}

// Past 256 ranks each host is a tile whose rank ranges, together, name
// every rank once; past 64 hosts the heat-map groups hosts into runs.
func TestLargeClusterTilesAndGroupedHeatmap(t *testing.T) {
	in := largeInput(t)
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	sec := r.Sections[0]
	p := &in.Result.Plans[0]
	svg := figure(t, sec, "placement")
	if len(svg.all("gpu")) != 0 {
		t.Errorf("%d ranks labelled one by one past %d ranks", len(svg.all("gpu")), detailedRanks)
	}
	tiles := svg.all("host-tile")
	if len(tiles) != len(in.Cluster.Hosts) {
		t.Fatalf("%d tiles for %d hosts", len(tiles), len(in.Cluster.Hosts))
	}
	count := map[int]int{}
	for _, tile := range tiles {
		for _, part := range strings.Split(tile.attr("data-ranks"), ",") {
			if part == "" {
				continue
			}
			var lo, hi int
			if _, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err != nil {
				if _, err := fmt.Sscanf(part, "%d", &lo); err != nil {
					t.Fatalf("tile ranks %q", part)
				}
				hi = lo
			}
			for k := lo; k <= hi; k++ {
				count[k]++
				if p.Placement[k].Host != tile.attr("data-host") {
					t.Errorf("rank %d in tile %s, placed on %s", k, tile.attr("data-host"), p.Placement[k].Host)
				}
			}
		}
	}
	checkRanksOnce(t, sec.ID, count, p.WorldSize())
	heat := figure(t, sec, "bandwidth")
	n := len(in.Cluster.Hosts)
	group := (n + groupedHeatCells - 1) / groupedHeatCells
	cells := (n + group - 1) / group
	if got := len(heat.all("bw")) + len(heat.all("diag")); got != cells*cells {
		t.Errorf("%d heat-map cells, want %d x %d", got, cells, cells)
	}
	if len(heat.all("pp")) == 0 {
		t.Errorf("no heat-map cell marks pipeline traffic")
	}
	if !strings.Contains(string(sec.Figures[2].SVG), "measured by probe --measure") {
		t.Errorf("heat-map of a measured cluster is not labelled measured")
	}
}
