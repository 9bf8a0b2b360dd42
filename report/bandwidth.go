package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// The bandwidth heat-map draws a row and column per host up to
// exactHeatHosts hosts; larger clusters are grouped into at most
// groupedHeatCells runs of consecutive hosts in placement order, each cell
// showing the slowest link of its block (the page stays small and legible).
const (
	exactHeatHosts   = 64
	groupedHeatCells = 32
)

// viridis stops (a perceptually uniform, color-blind-safe sequential map).
var viridis = []string{"#440154", "#482878", "#3E4989", "#31688E", "#26828E", "#1F9E89", "#35B779", "#6DCD59", "#B4DE2C", "#FDE725"}

func viridisAt(f float64) string {
	f = math.Max(0, math.Min(1, f))
	return viridis[int(math.Round(f*float64(len(viridis)-1)))]
}

// placementOrder lists host indices by their lowest rank, idle hosts last.
func placementOrder(c *cluster.Cluster, p *search.Plan) []int {
	first := make([]int, len(c.Hosts))
	for i := range first {
		first[i] = math.MaxInt
	}
	for _, rp := range p.Placement {
		if rp.HostIndex >= 0 && rp.HostIndex < len(first) {
			first[rp.HostIndex] = min(first[rp.HostIndex], rp.Rank)
		}
	}
	order := make([]int, len(c.Hosts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return first[a] - first[b] })
	return order
}

// bandwidthSVG is the host-to-host bandwidth matrix in placement order,
// with the host pairs that carry pipeline traffic outlined.
func bandwidthSVG(id string, c *cluster.Cluster, p *search.Plan, measured bool) string {
	order := placementOrder(c, p)
	n := len(order)
	group := 1
	if n > exactHeatHosts {
		group = (n + groupedHeatCells - 1) / groupedHeatCells
	}
	cells := (n + group - 1) / group
	cell := math.Max(6, math.Min(28, 560/float64(cells)))
	labelW := 0.0
	if group == 1 {
		for _, h := range order {
			labelW = math.Max(labelW, textWidth(c.Hosts[h].Name, smallFont))
		}
	} else {
		labelW = textWidth(fmt.Sprintf("%d-%d", n, n), smallFont)
	}
	labelW = math.Min(labelW+8, 200)
	s := newSVG(id, figWidth, 0)
	src := "nominal: NIC rates and links from the cluster file"
	if measured {
		src = "measured by probe --measure"
	}
	s.text(margin, 20, titleFont, "start", "Host-to-host bandwidth in placement order ("+src+")", "font-weight", "bold")
	sub := "black outline: host pairs that carry pipeline traffic; diagonal: within a host"
	if group > 1 {
		sub = fmt.Sprintf("%d hosts in runs of %d (each cell: the slowest link in its block); ", n, group) + sub
	}
	s.text(margin, 38, smallFont, "start", sub)
	lo, hi := math.Inf(1), 0.0
	for _, a := range order {
		for _, b := range order {
			if a != b {
				bw := c.LinkBetween(a, b).BytesPerS
				lo, hi = math.Min(lo, bw), math.Max(hi, bw)
			}
		}
	}
	scale := func(bw float64) float64 {
		if hi <= lo || lo <= 0 {
			return 1
		}
		return math.Log(bw/lo) / math.Log(hi/lo)
	}
	pp := map[[2]int]bool{}
	for _, e := range ppEdges(c, p) {
		pp[[2]int{e.from, e.to}] = true
	}
	x0, y0 := margin+labelW, 50+labelW
	name := func(i int) string {
		if group == 1 {
			return c.Hosts[order[i]].Name
		}
		return fmt.Sprintf("%d-%d", i*group, min(n, (i+1)*group)-1)
	}
	for i := 0; i < cells; i++ {
		y := y0 + float64(i)*cell
		if cell >= 11 || i%int(math.Ceil(11/cell)) == 0 {
			s.text(x0-4, y+cell/2+4, smallFont, "end", fit(name(i), labelW-8, smallFont))
			cx := x0 + float64(i)*cell + cell/2 + 4
			s.raw(`<text x="%s" y="%s" font-size="%s" text-anchor="start" transform="rotate(-90 %s %s)">%s</text>`,
				num(cx), num(y0-4), num(smallFont), num(cx), num(y0-4), esc(fit(name(i), labelW-8, smallFont)))
		}
	}
	s.open("class", "heatmap")
	for i := 0; i < cells; i++ {
		for j := 0; j < cells; j++ {
			x, y := x0+float64(j)*cell, y0+float64(i)*cell
			worst, carries, diag := math.Inf(1), false, true
			for a := i * group; a < min(n, (i+1)*group); a++ {
				for b := j * group; b < min(n, (j+1)*group); b++ {
					if a == b {
						continue
					}
					diag = false
					ha, hb := order[a], order[b]
					worst = math.Min(worst, c.LinkBetween(ha, hb).BytesPerS)
					carries = carries || pp[[2]int{ha, hb}]
				}
			}
			if diag {
				s.rect(x, y, cell, cell, "#FFFFFF", "within "+name(i), "stroke", "#DDD", "class", "diag")
				continue
			}
			title := fmt.Sprintf("%s → %s: %s", name(i), name(j), gbit(worst))
			if carries {
				title += "; carries pipeline traffic"
			}
			s.rect(x, y, cell, cell, viridisAt(scale(worst)), title, "class", "bw", "data-gbit", fmt.Sprintf("%.6g", worst*8/1e9))
			if carries {
				s.rect(x+1, y+1, cell-2, cell-2, "none", "", "stroke", "#000", "stroke-width", "2", "class", "pp")
			}
		}
	}
	s.close()
	// Color bar.
	bx, by := x0+float64(cells)*cell+40, y0
	s.text(bx, by-8, smallFont, "start", "Gbit/s (log scale)")
	for k := range viridis {
		f := 1 - float64(k)/float64(len(viridis)-1)
		s.rect(bx, by+float64(k)*16, 18, 16, viridisAt(f), "")
	}
	s.text(bx+24, by+12, smallFont, "start", gbit(hi))
	s.text(bx+24, by+float64(len(viridis))*16, smallFont, "start", gbit(lo))
	s.h = math.Max(y0+float64(cells)*cell, by+float64(len(viridis))*16) + 16
	return s.String()
}
