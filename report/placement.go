package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// detailedRanks is the largest job whose placement map labels every GPU;
// beyond it each host is one tile (a label per rank would be unreadable).
const detailedRanks = 256

// rankCoord is a global rank's position in Megatron's order (TP fastest,
// then CP, DP, PP).
type rankCoord struct{ stage, dp, cp, tp int }

func coordOf(p *search.Plan, rank int) rankCoord {
	tp, cp, dp := max(p.TP, 1), max(p.CP, 1), max(p.DP, 1)
	u := rank / tp
	return rankCoord{stage: u / (cp * dp), dp: (u / cp) % dp, cp: u % cp, tp: rank % tp}
}

// hostRanks is what the placement puts on one host.
type hostRanks struct {
	byGPU map[int]search.RankPlacement
	ranks []int
}

func ranksByHost(c *cluster.Cluster, p *search.Plan) []hostRanks {
	out := make([]hostRanks, len(c.Hosts))
	for _, rp := range p.Placement {
		if rp.HostIndex < 0 || rp.HostIndex >= len(out) {
			continue
		}
		h := &out[rp.HostIndex]
		if h.byGPU == nil {
			h.byGPU = map[int]search.RankPlacement{}
		}
		h.byGPU[rp.GPU] = rp
		h.ranks = append(h.ranks, rp.Rank)
	}
	for i := range out {
		slices.Sort(out[i].ranks)
	}
	return out
}

// rankRanges writes sorted ranks as "0-7,16-23".
func rankRanges(ranks []int) string {
	var parts []string
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprint(ranks[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ranks[i], ranks[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ppEdge is a pipeline stage boundary that crosses hosts.
type ppEdge struct{ from, to, stage int }

// ppEdges lists host pairs that carry pipeline traffic (stage r to r+1 of
// the same DP and CP position, and the wrap-around of interleaving).
func ppEdges(c *cluster.Cluster, p *search.Plan) []ppEdge {
	tp, cp, dp := max(p.TP, 1), max(p.CP, 1), max(p.DP, 1)
	hostOf := make(map[int]int, len(p.Placement))
	for _, rp := range p.Placement {
		hostOf[rp.Rank] = rp.HostIndex
	}
	seen := map[[2]int]bool{}
	var out []ppEdge
	add := func(a, b, stage int) {
		if a == b || seen[[2]int{a, b}] {
			return
		}
		seen[[2]int{a, b}] = true
		out = append(out, ppEdge{a, b, stage})
	}
	block := func(r, d, k int) int { return (k + d*cp + r*cp*dp) * tp }
	for r := 0; r < p.PP; r++ {
		next := r + 1
		if next == p.PP {
			if max(p.VPP, 1) == 1 {
				continue
			}
			next = 0
		}
		for d := 0; d < dp; d++ {
			for k := 0; k < cp; k++ {
				add(hostOf[block(r, d, k)], hostOf[block(next, d, k)], r)
			}
		}
	}
	return out
}

// placementSVG draws islands, their hosts and each GPU's rank: detailed
// (a labelled cell per GPU, TP groups outlined) up to detailedRanks ranks,
// else a tile per host striped by the stages it holds.
func placementSVG(id string, c *cluster.Cluster, p *search.Plan) string {
	s := newSVG(id, figWidth, 0)
	world := p.WorldSize()
	s.text(margin, 20, titleFont, "start", fmt.Sprintf("Placement: %d ranks on %d hosts in %d island(s); color = pipeline stage", world, usedHosts(p), len(c.Islands)), "font-weight", "bold")
	var items []legendItem
	for r := 0; r < min(p.PP, 16); r++ {
		items = append(items, legendItem{fill: stageColor(r), label: fmt.Sprintf("stage %d", r)})
	}
	if p.PP > 16 {
		items = append(items, legendItem{fill: "#FFFFFF", stroke: "#000", label: fmt.Sprintf("... %d stages, colors repeat", p.PP)})
	}
	items = append(items, legendItem{fill: "#FFFFFF", stroke: "#999", label: "idle GPU"})
	y := s.legend(margin, 32, figWidth-margin, items)
	hr := ranksByHost(c, p)
	edges := ppEdges(c, p)
	if world <= detailedRanks {
		y = placementDetailed(s, c, p, hr, edges, y)
	} else {
		y = placementTiles(s, c, p, hr, edges, y)
	}
	y = islandLinks(s, c, edges, y+6)
	s.h = y + 8
	return s.String()
}

func usedHosts(p *search.Plan) int {
	seen := map[int]bool{}
	for _, rp := range p.Placement {
		seen[rp.HostIndex] = true
	}
	return len(seen)
}

// stageColor cycles the palette without black (text is drawn on it).
func stageColor(r int) string { return palette[r%7] }

func islandHeading(c *cluster.Cluster, i int) string {
	isl := c.Islands[i]
	sp := isl.Spec
	var nics []string
	for _, n := range sp.NICs {
		nics = append(nics, fmt.Sprintf("%dx %s %s", n.Count, n.RateText(), n.Type))
	}
	gpu := sp.GPU.Model
	if len(isl.Hosts) > 0 {
		gpu = c.Hosts[isl.Hosts[0]].GPU.Model
	}
	h := fmt.Sprintf("island %s: %d hosts x %d %s, %s", sp.Name, len(isl.Hosts), sp.GPUsPerHost, gpu, sp.IntraHost.Type)
	if len(nics) > 0 {
		h += ", " + strings.Join(nics, " + ")
	}
	return h
}

func placementDetailed(s *svg, c *cluster.Cluster, p *search.Plan, hr []hostRanks, edges []ppEdge, y float64) float64 {
	const (
		labelW = 200.0
		noteW  = 250.0
		cellH  = 40.0
		gap    = 4.0
	)
	maxGPUs := 1
	for _, h := range c.Hosts {
		maxGPUs = max(maxGPUs, h.GPUs)
	}
	cellW := math.Min(58, (figWidth-2*margin-labelW-noteW-16)/float64(maxGPUs)-gap)
	outOf := map[int][]ppEdge{}
	for _, e := range edges {
		outOf[e.from] = append(outOf[e.from], e)
	}
	for i, isl := range c.Islands {
		top := y
		y += 24
		s.text(margin+8, top+17, fontSize, "start", fit(islandHeading(c, i), figWidth-2*margin-16, fontSize), "font-weight", "bold", "class", "island")
		for _, h := range isl.Hosts {
			host := c.Hosts[h]
			s.open("class", "host", "data-host", host.Name)
			s.title(fmt.Sprintf("%s (%s): ranks %s", host.Name, host.GPU.Model, rankRanges(hr[h].ranks)))
			s.text(margin+8, y+cellH/2+4, fontSize, "start", fit(host.Name, labelW-12, fontSize), "class", "host-name")
			x0 := margin + labelW
			for g := 0; g < host.GPUs; g++ {
				x := x0 + float64(g)*(cellW+gap)
				rp, ok := hr[h].byGPU[g]
				if !ok {
					s.rect(x, y, cellW, cellH, "#FFFFFF", fmt.Sprintf("%s GPU %d: idle", host.Name, g), "stroke", "#999", "stroke-dasharray", "3 2", "class", "idle")
					continue
				}
				gpuCell(s, p, host.Name, rp, x, y, cellW, cellH)
			}
			tpGroups(s, p, hr[h], x0, y, cellW, cellH, gap)
			ppNote(s, c, p.PP, outOf[h], figWidth-margin-noteW+8, y, noteW-8)
			s.close()
			y += cellH + gap + 4
		}
		s.rect(margin, top, figWidth-2*margin, y-top+4, "none", "", "stroke", "#555", "stroke-width", "1.5", "rx", "6", "class", "island-box")
		y = islandGap(s, c, edges, i, y+4)
	}
	return y
}

// gpuCell is one GPU: its global rank, and stage, DP replica (and CP
// rank) below.
func gpuCell(s *svg, p *search.Plan, host string, rp search.RankPlacement, x, y, w, h float64) {
	rc := coordOf(p, rp.Rank)
	fill := stageColor(rc.stage)
	sub := fmt.Sprintf("s%d d%d", rc.stage, rc.dp)
	if max(p.CP, 1) > 1 {
		sub += fmt.Sprintf(" c%d", rc.cp)
	}
	s.open("class", "gpu", "data-rank", fmt.Sprint(rp.Rank), "data-stage", fmt.Sprint(rc.stage))
	s.title(fmt.Sprintf("rank %d on %s GPU %d (local rank %d): pipeline stage %d, data-parallel replica %d, tensor rank %d, context rank %d",
		rp.Rank, host, rp.GPU, rp.LocalRank, rc.stage, rc.dp, rc.tp, rc.cp))
	s.rect(x, y, w, h, fill, "")
	tc := textColor(fill)
	s.text(x+w/2, y+16, fontSize, "middle", fit(fmt.Sprint(rp.Rank), w-2, fontSize), "fill", tc, "font-weight", "bold")
	s.text(x+w/2, y+32, smallFont, "middle", fit(sub, w-2, smallFont), "fill", tc)
	s.close()
}

// tpGroups outlines each run of GPUs that forms one tensor-parallel group.
func tpGroups(s *svg, p *search.Plan, hr hostRanks, x0, y, cellW, cellH, gap float64) {
	tp := max(p.TP, 1)
	if tp == 1 {
		return
	}
	groups := map[int][]int{} // block -> GPUs
	for g, rp := range hr.byGPU {
		groups[rp.Rank/tp] = append(groups[rp.Rank/tp], g)
	}
	for _, gs := range groups {
		lo, hi := slices.Min(gs), slices.Max(gs)
		if hi-lo+1 != len(gs) {
			continue // not contiguous: outline would mislead
		}
		x := x0 + float64(lo)*(cellW+gap) - 2
		w := float64(hi-lo+1)*(cellW+gap) - gap + 4
		s.rect(x, y-2, w, cellH+4, "none", "", "stroke", "#000", "stroke-width", "2", "rx", "3", "class", "tp-group")
	}
}

// ppNote lists where a host sends pipeline traffic, with the link rate.
func ppNote(s *svg, c *cluster.Cluster, stages int, out []ppEdge, x, y, w float64) {
	for i, e := range out {
		if i == 2 && len(out) > 3 {
			s.text(x, y+13+float64(i)*14, smallFont, "start", fmt.Sprintf("+%d more pipeline links", len(out)-2), "class", "pp-note")
			return
		}
		l := c.LinkBetween(e.from, e.to)
		note := fmt.Sprintf("PP %d→%d to %s, %s", e.stage, (e.stage+1)%stages, c.Hosts[e.to].Name, gbit(l.BytesPerS))
		s.text(x, y+13+float64(i)*14, smallFont, "start", fit(note, w, smallFont), "class", "pp-note")
	}
}

// placementTiles draws one square per host, striped by the stages of its
// ranks, in a grid per island; each tile's tooltip names the host and its
// rank ranges.
func placementTiles(s *svg, c *cluster.Cluster, p *search.Plan, hr []hostRanks, edges []ppEdge, y float64) float64 {
	tile := 20.0
	if len(c.Hosts) > 512 {
		tile = 14
	}
	const gap = 3.0
	perRow := int((figWidth - 2*margin - 16) / (tile + gap))
	for i, isl := range c.Islands {
		top := y
		s.text(margin+8, top+17, fontSize, "start", fit(islandHeading(c, i), figWidth-2*margin-16, fontSize), "font-weight", "bold", "class", "island")
		y += 26
		for k, h := range isl.Hosts {
			x := margin + 8 + float64(k%perRow)*(tile+gap)
			ty := y + float64(k/perRow)*(tile+gap)
			hostTile(s, c, p, h, hr[h], x, ty, tile)
		}
		rows := (len(isl.Hosts) + perRow - 1) / perRow
		y += float64(rows)*(tile+gap) + 6
		s.rect(margin, top, figWidth-2*margin, y-top, "none", "", "stroke", "#555", "stroke-width", "1.5", "rx", "6", "class", "island-box")
		y = islandGap(s, c, edges, i, y)
	}
	return y
}

// islandGap is the space below island i's box; when another island
// follows, the link between the two is drawn across it (thick black when
// it carries pipeline traffic).
func islandGap(s *svg, c *cluster.Cluster, edges []ppEdge, i int, y float64) float64 {
	if i+1 >= len(c.Islands) {
		return y + 12
	}
	l, stages, ok := islandLink(c, edges, i, i+1)
	if !ok {
		return y + 12
	}
	stroke, width := "#999", 2.0
	if len(stages) > 0 {
		stroke, width = "#000", 5
	}
	s.open("class", "island-connector", "data-pp", fmt.Sprint(len(stages) > 0))
	s.line(margin+60, y, margin+60, y+30, stroke, width)
	s.text(margin+72, y+19, fontSize, "start", fit(linkLabel(c, i, i+1, l, stages), figWidth-2*margin-80, fontSize))
	s.close()
	return y + 30
}

// islandLink is the link between islands a and b (between their first
// hosts) and the sending stages of the pipeline traffic that crosses it.
func islandLink(c *cluster.Cluster, edges []ppEdge, a, b int) (cluster.Link, []int, bool) {
	ha, hb := c.Islands[a].Hosts, c.Islands[b].Hosts
	if len(ha) == 0 || len(hb) == 0 {
		return cluster.Link{}, nil, false
	}
	var stages []int
	for _, e := range edges {
		x, y := c.Hosts[e.from].Island, c.Hosts[e.to].Island
		if (x == a && y == b || x == b && y == a) && !slices.Contains(stages, e.stage) {
			stages = append(stages, e.stage)
		}
	}
	slices.Sort(stages)
	return c.LinkBetween(ha[0], hb[0]), stages, true
}

func linkLabel(c *cluster.Cluster, a, b int, l cluster.Link, stages []int) string {
	note := "no pipeline traffic"
	if len(stages) > 0 {
		var ss []string
		for _, x := range stages {
			ss = append(ss, fmt.Sprint(x))
		}
		note = "carries pipeline traffic after stage(s) " + strings.Join(ss, ",")
	}
	return fmt.Sprintf("%s ↔ %s: %s, %s latency; %s", c.Islands[a].Spec.Name, c.Islands[b].Spec.Name, gbit(l.BytesPerS), seconds(l.LatencyS), note)
}

func hostTile(s *svg, c *cluster.Cluster, p *search.Plan, h int, hr hostRanks, x, y, size float64) {
	host := c.Hosts[h]
	stages := map[int]int{}
	for _, r := range hr.ranks {
		stages[coordOf(p, r).stage]++
	}
	keys := make([]int, 0, len(stages))
	for k := range stages {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var names []string
	for _, k := range keys {
		names = append(names, fmt.Sprint(k))
	}
	title := fmt.Sprintf("%s: idle", host.Name)
	if len(hr.ranks) > 0 {
		title = fmt.Sprintf("%s: ranks %s, stage(s) %s", host.Name, rankRanges(hr.ranks), strings.Join(names, ","))
	}
	s.open("class", "host-tile", "data-host", host.Name, "data-ranks", rankRanges(hr.ranks))
	s.title(title)
	if len(hr.ranks) == 0 {
		s.rect(x, y, size, size, "#FFFFFF", "", "stroke", "#999", "stroke-dasharray", "2 2")
	}
	cx := x
	for _, k := range keys {
		w := size * float64(stages[k]) / float64(max(host.GPUs, len(hr.ranks)))
		s.rect(cx, y, w, size, stageColor(k), "")
		cx += w
	}
	s.close()
}

// islandLinks lists the links between every pair of islands and marks
// those that carry pipeline traffic.
func islandLinks(s *svg, c *cluster.Cluster, edges []ppEdge, y float64) float64 {
	if len(c.Islands) < 2 {
		return y
	}
	s.text(margin, y+14, fontSize, "start", "Links between islands", "font-weight", "bold")
	y += 22
	shown := 0
	for a := range c.Islands {
		for b := a + 1; b < len(c.Islands); b++ {
			if shown == 12 {
				s.text(margin+8, y+12, smallFont, "start", "(more island pairs not listed)")
				return y + 18
			}
			l, stages, ok := islandLink(c, edges, a, b)
			if !ok {
				continue
			}
			shown++
			stroke, width := "#999", 2.0
			if len(stages) > 0 {
				stroke, width = "#000", 4
			}
			s.open("class", "island-link", "data-pp", fmt.Sprint(len(stages) > 0))
			s.line(margin+8, y+8, margin+68, y+8, stroke, width)
			s.text(margin+76, y+12, fontSize, "start", fit(linkLabel(c, a, b, l, stages), figWidth-2*margin-80, fontSize))
			s.close()
			y += 20
		}
	}
	return y
}
