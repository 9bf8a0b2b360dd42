// Package report draws planner results as one self-contained HTML page
// (inline SVG and CSS, no scripts, nothing fetched) or as separate SVG
// files: each plan's iteration timeline from the schedule simulator, its
// placement map and host-to-host bandwidth, its memory per stage and per
// host, and why the chosen plan beat the others.
package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// Input is what the report is drawn from.
type Input struct {
	Cluster *cluster.Cluster
	Model   model.Model
	Result  *search.Result
	// Naive is the best plan ignoring islands and AsIs the user's own
	// layout; either may be nil.
	Naive, AsIs *search.Plan
	// ClusterName names the cluster file; Measured says its bandwidths
	// come from probe --measure.
	ClusterName string
	Measured    bool
	// Alternatives is how many other ranked plans get a section of their
	// own (default 2; the comparison plans always get one).
	Alternatives int
	// Chosen is the index of the plan the job uses (run --plan N), drawn
	// first; 0 is the best.
	Chosen int
}

// Figure is one SVG drawing; Name is its file stem under --svg.
type Figure struct {
	Name, Caption string
	SVG           template.HTML
}

// Section is one plan's figures.
type Section struct {
	ID, Heading, Summary string
	Figures              []Figure
}

// TableRow is one line of the ranked table.
type TableRow struct {
	Label, Shape, MB, Recompute, Optimizer, Offload, Layers string
	Iter, Tokens, TFLOPS, Bubble, Memory                    string
	Chosen                                                  bool
}

// Report is a built report, ready to write.
type Report struct {
	Title, Subtitle string
	Notes           []string
	Table           []TableRow
	Why             Figure
	Sections        []Section
}

// row is a plan with its label in the table and the figures.
type row struct {
	label, id string
	plan      *search.Plan
}

// Build computes every figure: a section for plan 1, for the next
// Alternatives plans, and for each comparison plan (best of the other
// offload kind when not ranked, ignoring islands, the user's layout).
func Build(in Input) (*Report, error) {
	if in.Cluster == nil || in.Result == nil || len(in.Result.Plans) == 0 {
		return nil, fmt.Errorf("report: no plan to draw")
	}
	if in.Model.NumLayers == 0 {
		return nil, fmt.Errorf("report: the model's shape is unknown (give --model)")
	}
	alt := in.Alternatives
	if alt <= 0 {
		alt = 2
	}
	res := in.Result
	if in.Chosen < 0 || in.Chosen >= len(res.Plans) {
		return nil, fmt.Errorf("report: plan %d chosen, %d ranked", in.Chosen+1, len(res.Plans))
	}
	rows, extra := tableRows(in)
	r := &Report{
		Title: fmt.Sprintf("%s on %s", res.Model.Name, clusterLabel(in)),
		Subtitle: fmt.Sprintf("%.1fB parameters, global batch %d, %s; %d GPUs in %d hosts, %d island(s); %d configurations considered, %d over memory",
			float64(res.Model.Parameters)/1e9, res.Plans[0].GlobalBatch, res.Plans[0].Framework, in.Cluster.TotalGPUs(), len(in.Cluster.Hosts), len(in.Cluster.Islands),
			res.Considered, res.RejectedMemory),
	}
	for i, x := range rows {
		r.Table = append(r.Table, tableRow(x, i == in.Chosen))
	}
	r.Notes = comparisonNotes(in, rows)
	r.Why = Figure{Name: "why-breakdown", Caption: "Predicted time breakdown of every plan in the table (the parts sum to the iteration time).", SVG: template.HTML(breakdownSVG("why-breakdown", rows))}
	drawn := []row{rows[in.Chosen]}
	for i := 0; len(drawn) <= alt && i < len(res.Plans); i++ {
		if i != in.Chosen {
			drawn = append(drawn, rows[i])
		}
	}
	drawn = append(drawn, extra...)
	for i, x := range drawn {
		sec, err := buildSection(in, x, i == 0)
		if err != nil {
			return nil, err
		}
		r.Sections = append(r.Sections, sec)
	}
	return r, nil
}

func clusterLabel(in Input) string {
	if in.ClusterName != "" {
		return in.ClusterName
	}
	return "the cluster"
}

// tableRows lists the ranked plans and then the comparison plans that are
// not already ranked (extra).
func tableRows(in Input) (rows, extra []row) {
	res := in.Result
	for i := range res.Plans {
		rows = append(rows, row{label: fmt.Sprintf("plan %d", i+1), id: fmt.Sprintf("plan%d", i+1), plan: &res.Plans[i]})
	}
	ranked := func(p *search.Plan) bool {
		for i := range res.Plans {
			if reflect.DeepEqual(res.Plans[i].Config, p.Config) {
				return true
			}
		}
		return false
	}
	add := func(label, id string, p *search.Plan) {
		if p != nil && !ranked(p) {
			x := row{label: label, id: id, plan: p}
			rows, extra = append(rows, x), append(extra, x)
		}
	}
	if cmp := res.Comparison; cmp != nil {
		if res.Plans[0].UsesOffload() {
			if a := cmp.BestWithoutOffload; a != nil && a.Fits {
				add("best without offload", "no-offload", a.Plan)
			}
		} else if a := cmp.BestWithOffload; a != nil && a.Fits {
			add("best with offload", "offload", a.Plan)
		}
	}
	add("ignoring islands", "naive", in.Naive)
	add("as given (--as-is)", "as-is", in.AsIs)
	return rows, extra
}

func tableRow(x row, chosen bool) TableRow {
	p := x.plan
	return TableRow{
		Label: x.label, Shape: shape(p), MB: fmt.Sprint(p.MicroBatch), Recompute: string(p.Recompute),
		Optimizer: p.OptimizerLabel(), Offload: p.OffloadLabel(), Layers: search.CompactLayers(p.StageLayers),
		Iter: fmt.Sprintf("%.3f", p.Predicted.IterationSeconds), Tokens: fmt.Sprintf("%.0f", p.Predicted.TokensPerSecond),
		TFLOPS: fmt.Sprintf("%.1f", p.Predicted.TFLOPSPerGPU), Bubble: fmt.Sprintf("%.1f%%", 100*p.Predicted.BubbleFraction),
		Memory: fmt.Sprintf("%.1f / %.1f", p.Memory.PeakBytesPerGPU/gib, p.Memory.GPUCapacityBytes/gib),
		Chosen: chosen,
	}
}

// comparisonNotes says in words how plan 1 compares with each other kind.
func comparisonNotes(in Input, rows []row) []string {
	first := rows[0].plan
	var notes []string
	for _, x := range rows[1:] {
		if strings.HasPrefix(x.id, "plan") {
			continue
		}
		notes = append(notes, fmt.Sprintf("%s (%s): %.3f s per iteration, %.2fx plan 1's %.3f s.", x.label, shape(x.plan),
			x.plan.Predicted.IterationSeconds, x.plan.Predicted.IterationSeconds/first.Predicted.IterationSeconds, first.Predicted.IterationSeconds))
	}
	if cmp := in.Result.Comparison; cmp != nil {
		a, kind := cmp.BestWithOffload, "with"
		if first.UsesOffload() {
			a, kind = cmp.BestWithoutOffload, "without"
		}
		switch {
		case a == nil:
		case a.Considered == 0:
			notes = append(notes, "Best plan "+kind+" offload: not tried (every configuration fits without it, or a flag forbids it).")
		case !a.Fits && a.Miss != nil:
			where := fmt.Sprintf("per GPU on stage %d", a.Miss.Stage)
			if a.Miss.Memory == "host" {
				where = "of host memory per node"
			}
			notes = append(notes, fmt.Sprintf("Best plan %s offload: none fits; the closest (%s) needs %.1f GiB %s, has %.1f GiB.",
				kind, shape(&search.Plan{Config: a.Miss.Config}), a.Miss.NeedBytes/gib, where, a.Miss.CapacityBytes/gib))
		}
	}
	return notes
}

func buildSection(in Input, x row, chosen bool) (Section, error) {
	p := x.plan
	tl, err := search.PlanTimeline(in.Cluster, in.Model, p)
	if err != nil {
		return Section{}, fmt.Errorf("report: %s: %w", x.label, err)
	}
	head := x.label
	if chosen {
		head += " (chosen)"
	}
	sec := Section{
		ID: x.id, Heading: head + ": " + shape(p),
		Summary: fmt.Sprintf("micro-batch %d x %d, recompute %s, %s optimizer, offload %s; layers per stage %s; %.3f s per iteration, %.0f tokens/s, %.1f TFLOP/s per GPU (model FLOPs), bubble %.1f%%, peak %.1f of %.1f GiB per GPU on stage %d.",
			p.MicroBatch, p.NumMicroBatches, p.Recompute, p.OptimizerLabel(), p.OffloadLabel(), search.CompactLayers(p.StageLayers),
			p.Predicted.IterationSeconds, p.Predicted.TokensPerSecond, p.Predicted.TFLOPSPerGPU, 100*p.Predicted.BubbleFraction,
			p.Memory.PeakBytesPerGPU/gib, p.Memory.GPUCapacityBytes/gib, p.Memory.PeakStage),
	}
	fig := func(kind, caption, svg string) {
		sec.Figures = append(sec.Figures, Figure{Name: x.id + "-" + kind, Caption: caption, SVG: template.HTML(svg)})
	}
	fig("timeline", "Timeline of one iteration from the event-driven schedule simulator: a lane per pipeline stage, a block per forward or backward of one model chunk for one micro-batch (number inside; hover for duration). Lines between lanes are pipeline transfers.",
		timelineSVG(x.id+"-timeline", p, tl))
	fig("placement", "Placement: each host with its GPUs and ranks (s = pipeline stage, d = data-parallel replica); black outlines are tensor-parallel groups; PP notes name the host and link each stage sends to.",
		placementSVG(x.id+"-placement", in.Cluster, p))
	if len(in.Cluster.Hosts) > 1 {
		fig("bandwidth", "Host-to-host bandwidth the planner used, hosts in placement order.",
			bandwidthSVG(x.id+"-bandwidth", in.Cluster, p, in.Measured))
	}
	fig("memory", "Memory per GPU of every pipeline stage (the planner's estimate) and host memory per node.",
		memorySVG(x.id+"-memory", in.Cluster, in.Model, p))
	return sec, nil
}

//go:embed page.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Parse(pageTemplate))

// WriteHTML writes the whole report as one HTML document.
func (r *Report) WriteHTML(w io.Writer) error {
	var b bytes.Buffer
	if err := page.Execute(&b, r); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Figures lists every figure, the breakdown first.
func (r *Report) Figures() []Figure {
	out := []Figure{r.Why}
	for _, s := range r.Sections {
		out = append(out, s.Figures...)
	}
	return out
}

// WriteSVGs writes each figure to dir/NAME.svg and returns the paths. The
// directory is made 0700 or must be the user's own that no one else can
// write (atomicfile.OwnDir); a figure of an earlier run is replaced, a link
// at its name too, never what the link points to.
func (r *Report) WriteSVGs(dir string) ([]string, error) {
	if err := atomicfile.OwnDir(dir, false); err != nil {
		return nil, fmt.Errorf("--svg %w", err)
	}
	var paths []string
	var files []atomicfile.File
	for _, f := range r.Figures() {
		doc := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + string(f.SVG) + "\n"
		files = append(files, atomicfile.File{Name: f.Name + ".svg", Data: []byte(doc), Perm: 0o644})
		paths = append(paths, filepath.Join(dir, f.Name+".svg"))
	}
	if err := atomicfile.CreateAll(dir, files, true); err != nil {
		return nil, fmt.Errorf("--svg: %w", err)
	}
	return paths, nil
}

// WriteFile writes the HTML report to path.
func (r *Report) WriteFile(path string) error {
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		return err
	}
	// Replaced whole, through a symlink to its target, keeping its mode.
	if err := atomicfile.WriteThrough(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}
