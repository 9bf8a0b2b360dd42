package report

import (
	"fmt"
	"math"

	"github.com/pipette-launch/pipette-launch/planner/search"
)

// timeParts are the predicted time breakdown's parts, in the order the
// bars stack them; they sum to the iteration time.
var timeParts = []struct {
	name, color string
	secs        func(search.TimeBreakdown) float64
}{
	{"compute (incl. optimizer step)", palette[0], func(b search.TimeBreakdown) float64 { return b.Compute }},
	{"tensor/context-parallel comm.", palette[1], func(b search.TimeBreakdown) float64 { return b.TP }},
	{"pipeline bubble and transfers", palette[2], func(b search.TimeBreakdown) float64 { return b.PP }},
	{"data-parallel reduction (exposed)", palette[3], func(b search.TimeBreakdown) float64 { return b.DP }},
	{"CPU offload (exposed)", palette[5], func(b search.TimeBreakdown) float64 { return b.Offload }},
}

// breakdownSVG draws each row's predicted iteration as a stacked bar.
func breakdownSVG(id string, rows []row) string {
	const labelW, barH, gap = 210.0, 22.0, 8.0
	s := newSVG(id, figWidth, 0)
	s.text(margin, 20, titleFont, "start", "Predicted iteration time per plan, by what the critical path waits on", "font-weight", "bold")
	var items []legendItem
	for _, tp := range timeParts {
		items = append(items, legendItem{fill: tp.color, label: tp.name})
	}
	y := s.legend(margin, 32, figWidth-margin, items) + 4
	top := 0.0
	for _, r := range rows {
		top = math.Max(top, r.plan.Predicted.IterationSeconds)
	}
	if top <= 0 {
		top = 1
	}
	plotX, plotW := margin+labelW, figWidth-2*margin-labelW-90
	xOf := func(t float64) float64 { return plotX + t/top*plotW }
	y0 := y
	for _, r := range rows {
		s.open("class", "plan-bar", "data-label", r.label)
		s.text(plotX-8, y+barH/2+4, fontSize, "end", fit(r.label+": "+shape(r.plan), labelW-8, fontSize))
		acc := 0.0
		for _, tp := range timeParts {
			v := tp.secs(r.plan.Predicted.Breakdown)
			if v <= 0 {
				continue
			}
			s.rect(xOf(acc), y, xOf(acc+v)-xOf(acc), barH, tp.color, fmt.Sprintf("%s, %s: %s", r.label, tp.name, seconds(v)), "class", "part", "data-seconds", fmt.Sprintf("%.17g", v))
			acc += v
		}
		s.text(xOf(acc)+6, y+barH/2+4, smallFont, "start", seconds(r.plan.Predicted.IterationSeconds))
		s.close()
		y += barH + gap
	}
	step := niceStep(top, 8)
	for v := 0.0; v <= top*1.0000001; v += step {
		s.line(xOf(v), y0-4, xOf(v), y, colGrid, 1, "stroke-dasharray", "2 3")
		s.text(xOf(v), y+14, smallFont, "middle", tickLabel(v, step))
	}
	s.text(plotX+plotW/2, y+32, fontSize, "middle", "seconds per iteration")
	s.h = y + 42
	return s.String()
}

// shape is a plan's parallel layout in a few characters.
func shape(p *search.Plan) string {
	s := fmt.Sprintf("TP%d PP%d DP%d", p.TP, p.PP, p.DP)
	if p.CP > 1 {
		s += fmt.Sprintf(" CP%d", p.CP)
	}
	if p.VPP > 1 {
		s += fmt.Sprintf(" VPP%d", p.VPP)
	}
	return s
}
