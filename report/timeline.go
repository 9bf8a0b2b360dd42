package report

import (
	"fmt"

	"github.com/pipette-launch/pipette-launch/planner/search"
)

// Figure geometry shared by the figures: a fixed width that fits a laptop
// screen and a landscape page.
const (
	figWidth = 1120.0
	margin   = 16.0
)

// Timeline colors besides the per-chunk palette.
const (
	colDP        = "#7F7F7F"
	colOptimizer = "#333333"
	colOffload   = "#D55E00"
	colLane      = "#EEEEEE"
	colGrid      = "#CCCCCC"
)

// Transfer lines past which only visible-length transfers are drawn.
const (
	maxTransferLines = 300
	minTransferPx    = 1.5
)

// chunkColor keeps yellow and black for other marks: chunks cycle through
// the first six palette colors.
func chunkColor(c int) string { return palette[c%6] }

// timelineSVG draws one iteration: a lane per pipeline stage with each
// op as a block (forward tinted, backward solid, recomputation hatched),
// transfers as lines between lanes, then the DP reduction per stage and
// the optimizer step and offload across all lanes.
func timelineSVG(id string, p *search.Plan, tl *search.Timeline) string {
	const (
		labelW = 190.0
		laneH  = 32.0
		laneG  = 8.0
	)
	plotX, plotW := margin+labelW, figWidth-2*margin-labelW
	T := tl.IterationSeconds
	if T <= 0 {
		T = 1
	}
	xOf := func(t float64) float64 { return plotX + t/T*plotW }
	s := newSVG(id, figWidth, 0)
	recompute := s.hatch("recompute", "#000000")
	offload := s.hatch("offload", colOffload)
	s.text(margin, 20, titleFont, "start", "One iteration, slowest pipeline (data-parallel replica "+fmt.Sprint(tl.Pipeline)+")", "font-weight", "bold")
	s.text(margin, 38, smallFont, "start", fmt.Sprintf("PP %d x VPP %d, %d micro-batches; iteration %s, bubble %.1f%% (gaps in the grey lanes)",
		tl.Stages, tl.VPP, tl.MicroBatches, seconds(tl.IterationSeconds), 100*p.Predicted.BubbleFraction))
	var items []legendItem
	for c := 0; c < tl.VPP; c++ {
		name := "model chunk " + fmt.Sprint(c)
		if tl.VPP == 1 {
			name = ""
		}
		items = append(items, legendItem{fill: tint(chunkColor(c), 0.55), label: joinLabel("forward", name)},
			legendItem{fill: chunkColor(c), label: joinLabel("backward", name)})
	}
	items = append(items, legendItem{fill: "#FFFFFF", stroke: "#000", pattern: recompute, label: "recompute (in backward)"},
		legendItem{fill: "#000", label: "pipeline transfer"},
		legendItem{fill: colDP, label: "DP reduction (exposed)"},
		legendItem{fill: colOptimizer, label: "optimizer step"})
	if tl.Offload.End > tl.Offload.Start {
		items = append(items, legendItem{fill: "#FFFFFF", stroke: colOffload, pattern: offload, label: "CPU offload (exposed)"})
	}
	y0 := s.legend(margin, 50, figWidth-margin, items) + 4
	laneY := func(r int) float64 { return y0 + float64(r)*(laneH+laneG) }
	lanesEnd := laneY(tl.Stages) - laneG
	// Grid first, so blocks sit on top of it.
	step := niceStep(T, 10)
	for v := 0.0; v <= T*1.0000001; v += step {
		s.line(xOf(v), y0-4, xOf(v), lanesEnd+4, colGrid, 1)
	}
	byStage := make([][]search.TimelineOp, tl.Stages)
	for _, op := range tl.Ops {
		byStage[op.Rank] = append(byStage[op.Rank], op)
	}
	for r := 0; r < tl.Stages; r++ {
		y := laneY(r)
		s.open("class", "lane", "data-stage", fmt.Sprint(r))
		s.text(margin, y+13, fontSize, "start", fmt.Sprintf("stage %d", r), "font-weight", "bold")
		s.text(margin, y+28, smallFont, "start", fit(tl.Hosts[r], labelW-8, smallFont), "class", "host")
		s.rect(plotX, y, plotW, laneH, colLane, "", "class", "lane-bg")
		for _, op := range byStage[r] {
			drawOp(s, op, xOf, y, laneH, recompute)
		}
		rd := tl.Reduce[r]
		if rd.End > rd.Start {
			s.rect(xOf(rd.Start), y+4, xOf(rd.End)-xOf(rd.Start), laneH-8, colDP,
				fmt.Sprintf("stage %d: exposed data-parallel reduction (with the tied-embedding all-reduce on the first and last stage), %s", r, seconds(rd.End-rd.Start)),
				"class", "dp")
		}
		s.close()
	}
	// A dense schedule's instant same-host sends would bury the blocks
	// under vertical lines: past maxTransferLines only sends that take a
	// visible time are drawn, and the subtitle says how many are left out.
	s.open("class", "transfers")
	omitted := 0
	for _, x := range tl.Transfers {
		if len(tl.Transfers) > maxTransferLines && xOf(x.End)-xOf(x.Start) < minTransferPx {
			omitted++
			continue
		}
		dir := "activations"
		if x.Backward {
			dir = "gradients"
		}
		y1 := laneY(x.From) + laneH/2
		y2 := laneY(x.To) + laneH/2
		s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" class="transfer"><title>%s</title></line>`,
			num(xOf(x.Start)), num(y1), num(xOf(x.End)), num(y2),
			esc(fmt.Sprintf("%s, micro-batch %d chunk %d, stage %d→%d: %s", dir, x.Micro, x.Chunk, x.From, x.To, seconds(x.End-x.Start))))
	}
	s.close()
	if omitted > 0 {
		s.text(figWidth-margin, 38, smallFont, "end", fmt.Sprintf("%d pipeline transfers shorter than %g px not drawn", omitted, minTransferPx), "class", "omitted")
	}
	band := func(sp search.Span, fill, pattern, class, what string) {
		if sp.End <= sp.Start {
			return
		}
		title := fmt.Sprintf("%s: %s", what, seconds(sp.End-sp.Start))
		s.rect(xOf(sp.Start), y0, xOf(sp.End)-xOf(sp.Start), lanesEnd-y0, fill, title, "class", class)
		if pattern != "" {
			s.rect(xOf(sp.Start), y0, xOf(sp.End)-xOf(sp.Start), lanesEnd-y0, "url(#"+pattern+")", title)
		}
	}
	band(tl.Optimizer, colOptimizer, "", "optimizer", "optimizer step (slowest stage)")
	band(tl.Offload, "#FFFFFF", offload, "offload", "exposed CPU offload (PCIe copies and CPU Adam)")
	// Axis.
	ay := lanesEnd + 8
	s.line(plotX, ay, plotX+plotW, ay, "#000", 1)
	for v := 0.0; v <= T*1.0000001; v += step {
		s.line(xOf(v), ay, xOf(v), ay+5, "#000", 1)
		s.text(xOf(v), ay+19, smallFont, "middle", tickLabel(v, step))
	}
	s.text(plotX+plotW/2, ay+36, fontSize, "middle", "seconds from the start of the iteration")
	s.h = ay + 46
	return s.String()
}

func joinLabel(a, b string) string {
	if b == "" {
		return a
	}
	return a + ", " + b
}

// drawOp draws one forward or backward block; the micro-batch number is
// written inside when it fits.
func drawOp(s *svg, op search.TimelineOp, xOf func(float64) float64, y, h float64, recompute string) {
	x0, x1 := xOf(op.Start), xOf(op.End)
	kind, fill := "fwd", tint(chunkColor(op.Chunk), 0.55)
	title := fmt.Sprintf("stage %d, chunk %d, micro-batch %d: forward %s (%d layers)", op.Rank, op.Chunk, op.Micro, seconds(op.End-op.Start), op.Layers)
	if op.Backward {
		kind, fill = "bwd", chunkColor(op.Chunk)
		title = fmt.Sprintf("stage %d, chunk %d, micro-batch %d: backward %s (%d layers)", op.Rank, op.Chunk, op.Micro, seconds(op.End-op.Start), op.Layers)
		if op.Recompute > 0 {
			title += ", of which recomputing the forward " + seconds(op.Recompute)
		}
	}
	// The block carries the tooltip and the data; the hatch and the label
	// ignore the pointer so hovering anywhere on the block shows it.
	class := "op " + kind
	if x1-x0 >= 4 { // a white edge separates wide blocks; narrow ones would turn white
		class += " sep"
	}
	s.rect(x0, y+2, x1-x0, h-4, fill, title, "class", class,
		"data-chunk", fmt.Sprint(op.Chunk), "data-micro", fmt.Sprint(op.Micro), "data-s", fmt.Sprintf("%.6g", op.End-op.Start))
	if op.Backward && op.Recompute > 0 {
		s.rect(x0, y+2, xOf(op.Start+op.Recompute)-x0, h-4, "url(#"+recompute+")", "", "class", "recompute")
	}
	label := fmt.Sprint(op.Micro)
	if x1-x0 >= textWidth(label, smallFont)+4 {
		s.raw(`<text x="%s" y="%s" class="lbl" fill="%s">%s</text>`, num((x0+x1)/2), num(y+h/2+4), textColor(fill), label)
	}
}
