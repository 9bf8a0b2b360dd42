package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// memPart is one kind of per-GPU memory in the stacked bars.
type memPart struct {
	name, color string
	bytes       func(memory.Breakdown) float64
}

var memParts = []memPart{
	{"weights", palette[0], func(b memory.Breakdown) float64 { return b.Weights }},
	{"gradients", palette[1], func(b memory.Breakdown) float64 { return b.Gradients }},
	{"optimizer", palette[2], func(b memory.Breakdown) float64 { return b.Optimizer }},
	{"activations", palette[3], func(b memory.Breakdown) float64 { return b.Activations }},
	{"other", palette[4], func(b memory.Breakdown) float64 { return b.Other }},
}

// stageCapacity is the smallest GPU memory among the hosts a stage uses.
func stageCapacity(c *cluster.Cluster, p *search.Plan) []float64 {
	capOf := make([]float64, p.PP)
	for i := range capOf {
		capOf[i] = math.Inf(1)
	}
	for _, rp := range p.Placement {
		st := coordOf(p, rp.Rank).stage
		if st < len(capOf) && rp.HostIndex >= 0 && rp.HostIndex < len(c.Hosts) {
			capOf[st] = math.Min(capOf[st], c.Hosts[rp.HostIndex].GPU.MemoryBytes())
		}
	}
	for i := range capOf {
		if math.IsInf(capOf[i], 1) {
			capOf[i] = p.Memory.GPUCapacityBytes
		}
	}
	return capOf
}

// memorySVG draws each pipeline stage's per-GPU memory as a stacked bar
// against the smallest GPU the stage runs on, then each kind of host's
// memory need (offloaded states hatched) against its DRAM.
func memorySVG(id string, c *cluster.Cluster, m model.Model, p *search.Plan) string {
	const (
		plotH  = 240.0
		axisW  = 70.0
		barMax = 56.0
	)
	s := newSVG(id, figWidth, 0)
	offHatch := s.hatch("offload", "#000000")
	s.text(margin, 20, titleFont, "start", "GPU memory per pipeline stage (per GPU) against capacity", "font-weight", "bold")
	var items []legendItem
	for _, mp := range memParts {
		items = append(items, legendItem{fill: mp.color, label: mp.name})
	}
	items = append(items, legendItem{fill: "#FFFFFF", stroke: "#000", label: "dashed line: GPU capacity"})
	y0 := s.legend(margin, 32, figWidth-margin, items) + 6
	stages := make([]memory.Breakdown, p.PP)
	capOf := stageCapacity(c, p)
	top := 0.0
	for r := range stages {
		stages[r] = memory.EstimateStage(m, p.Config, p.Framework, r)
		top = math.Max(top, math.Max(stages[r].Total(), capOf[r]))
	}
	top *= 1.08
	plotX, plotW := margin+axisW, figWidth-2*margin-axisW
	yOf := func(b float64) float64 { return y0 + plotH - b/top*plotH }
	step := niceStep(top/gib, 6)
	for v := 0.0; v <= top/gib; v += step {
		s.line(plotX, yOf(v*gib), plotX+plotW, yOf(v*gib), colGrid, 1)
		s.text(plotX-6, yOf(v*gib)+4, smallFont, "end", tickLabel(v, step))
	}
	s.raw(`<text x="%s" y="%s" font-size="%s" text-anchor="middle" transform="rotate(-90 %s %s)">GiB per GPU</text>`,
		num(margin+12), num(y0+plotH/2), num(fontSize), num(margin+12), num(y0+plotH/2))
	slot := plotW / float64(p.PP)
	bw := math.Min(barMax, slot*0.7)
	for r, b := range stages {
		cx := plotX + slot*(float64(r)+0.5)
		s.open("class", "stage-bar", "data-stage", fmt.Sprint(r))
		acc := 0.0
		for _, mp := range memParts {
			v := mp.bytes(b)
			if v <= 0 {
				continue
			}
			s.rect(cx-bw/2, yOf(acc+v), bw, yOf(acc)-yOf(acc+v), mp.color,
				fmt.Sprintf("stage %d %s: %.2f GiB", r, mp.name, v/gib), "class", "mem", "data-part", mp.name, "data-bytes", fmt.Sprintf("%.17g", v))
			acc += v
		}
		s.line(cx-bw/2-6, yOf(capOf[r]), cx+bw/2+6, yOf(capOf[r]), "#000", 2, "stroke-dasharray", "5 3", "class", "capacity")
		if slot >= 44 || r%int(math.Ceil(44/slot)) == 0 {
			s.text(cx, y0+plotH+16, smallFont, "middle", fmt.Sprint(r))
		}
		if slot >= 56 {
			// Above the bar, and above the capacity mark when they are close.
			ly := yOf(acc) - 4
			if c := yOf(capOf[r]); ly > c-4 && ly < c+14 {
				ly = c - 4
			}
			s.text(cx, ly, smallFont, "middle", fmt.Sprintf("%.1f", acc/gib))
		}
		s.close()
	}
	s.line(plotX, y0+plotH, plotX+plotW, y0+plotH, "#000", 1)
	s.text(plotX+plotW/2, y0+plotH+34, fontSize, "middle", "pipeline stage (peak: stage "+fmt.Sprint(p.Memory.PeakStage)+", bar tops in GiB)")
	y := hostMemory(s, c, m, p, y0+plotH+56, offHatch)
	s.h = y + 8
	return s.String()
}

// hostKind is hosts that need the same host memory: same rank count and
// DRAM, in one island.
type hostKind struct {
	island, ranks int
	dram          float64
	hosts         []string
}

func hostKinds(c *cluster.Cluster, p *search.Plan) []hostKind {
	count := map[int]int{}
	for _, rp := range p.Placement {
		count[rp.HostIndex]++
	}
	var kinds []hostKind
	idx := map[[3]float64]int{}
	for h, host := range c.Hosts {
		if count[h] == 0 {
			continue
		}
		k := [3]float64{float64(host.Island), float64(count[h]), host.MemoryBytes}
		i, ok := idx[k]
		if !ok {
			i = len(kinds)
			idx[k] = i
			kinds = append(kinds, hostKind{island: host.Island, ranks: count[h], dram: host.MemoryBytes})
		}
		kinds[i].hosts = append(kinds[i].hosts, host.Name)
	}
	return kinds
}

func hostList(h []string) string {
	if len(h) <= 3 {
		return strings.Join(h, ", ")
	}
	return fmt.Sprintf("%s … %s (%d hosts)", h[0], h[len(h)-1], len(h))
}

// hostMemory draws one horizontal bar per kind of host.
func hostMemory(s *svg, c *cluster.Cluster, m model.Model, p *search.Plan, y float64, hatch string) float64 {
	const labelW, barH = 330.0, 22.0
	s.text(margin, y, titleFont, "start", "Host memory per node (planner's bound: its worst rank times the ranks on the node)", "font-weight", "bold")
	y += 14
	kinds := hostKinds(c, p)
	noOff := p.Config
	noOff.Offload = parallel.Offload{}
	top := 0.0
	needs := make([]float64, len(kinds))
	offs := make([]float64, len(kinds))
	for i, k := range kinds {
		needs[i] = memory.HostBytesPerNode(m, p.Config, p.Framework, k.ranks)
		offs[i] = math.Max(0, needs[i]-memory.HostBytesPerNode(m, noOff, p.Framework, k.ranks))
		top = math.Max(top, math.Max(needs[i], k.dram))
	}
	if top <= 0 {
		top = 1
	}
	plotX, plotW := margin+labelW, figWidth-2*margin-labelW-180 // room for "218.9 GiB of 512 GiB"
	xOf := func(b float64) float64 { return plotX + b/top*plotW }
	for i, k := range kinds {
		isl := c.Islands[k.island].Spec.Name
		s.open("class", "host-mem", "data-bytes", fmt.Sprintf("%.17g", needs[i]), "data-offload", fmt.Sprintf("%.17g", offs[i]))
		s.text(margin+4, y+barH/2+4, smallFont, "start", fit(fmt.Sprintf("%s: %s, %d ranks each", isl, hostList(k.hosts), k.ranks), labelW-8, smallFont))
		base := needs[i] - offs[i]
		s.rect(plotX, y, xOf(base)-plotX, barH, "#56B4E9", fmt.Sprintf("processes and buffers: %.1f GiB", base/gib))
		if offs[i] > 0 {
			s.rect(xOf(base), y, xOf(needs[i])-xOf(base), barH, "#E69F00", "", "class", "offload")
			s.rect(xOf(base), y, xOf(needs[i])-xOf(base), barH, "url(#"+hatch+")", fmt.Sprintf("offloaded states: %.1f GiB", offs[i]/gib))
		}
		label := fmt.Sprintf("%.1f GiB", needs[i]/gib)
		if k.dram > 0 {
			s.line(xOf(k.dram), y-3, xOf(k.dram), y+barH+3, "#000", 2, "stroke-dasharray", "5 3", "class", "capacity")
			label += fmt.Sprintf(" of %.0f GiB", k.dram/gib)
		} else {
			label += " (host memory not stated)"
		}
		s.text(math.Max(xOf(needs[i]), xOf(k.dram))+8, y+barH/2+4, smallFont, "start", label)
		s.close()
		y += barH + 8
	}
	legend := []legendItem{{fill: "#56B4E9", label: "rank processes, pinned buffers"}, {fill: "#E69F00", pattern: hatch, label: "offloaded optimizer/parameters"}, {fill: "#FFFFFF", stroke: "#000", label: "dashed line: host DRAM"}}
	return s.legend(margin, y+4, figWidth-margin, legend)
}
