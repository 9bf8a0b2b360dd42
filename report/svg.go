package report

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Okabe and Ito's qualitative palette (Color Universal Design, 2008): the
// eight colors stay distinct under the common color-vision deficiencies.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// color is the i-th palette color, cycling.
func color(i int) string { return palette[((i%len(palette))+len(palette))%len(palette)] }

// tint mixes a #rrggbb color with white (f = share of white).
func tint(c string, f float64) string {
	v, err := strconv.ParseUint(strings.TrimPrefix(c, "#"), 16, 32)
	if err != nil {
		return c
	}
	ch := func(shift uint) int {
		x := float64((v >> shift) & 0xff)
		return int(math.Round(x + (255-x)*f))
	}
	return fmt.Sprintf("#%02X%02X%02X", ch(16), ch(8), ch(0))
}

// textColor is black or white, whichever reads better on fill.
func textColor(fill string) string {
	v, err := strconv.ParseUint(strings.TrimPrefix(fill, "#"), 16, 32)
	if err != nil {
		return "#000"
	}
	r, g, b := float64((v>>16)&0xff), float64((v>>8)&0xff), float64(v&0xff)
	if 0.299*r+0.587*g+0.114*b > 150 {
		return "#000"
	}
	return "#fff"
}

// Font sizes in CSS pixels; charWidth is a conservative average advance of
// a sans-serif face per pixel of size, used to keep labels inside their box.
const (
	fontSize   = 12.0
	smallFont  = 11.0
	titleFont  = 14.0
	charWidth  = 0.62
	fontFamily = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
)

// textWidth estimates a label's width in pixels.
func textWidth(s string, size float64) float64 { return float64(len([]rune(s))) * size * charWidth }

// fit shortens s with an ellipsis so it fits width pixels at size.
func fit(s string, width, size float64) string {
	r := []rune(s)
	n := int(width / (size * charWidth))
	if len(r) <= n {
		return s
	}
	if n <= 1 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// num formats a coordinate compactly.
func num(x float64) string { return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64) }

// svg builds one SVG document as text; every string that enters it goes
// through esc, so host and model names cannot break the markup.
type svg struct {
	b    strings.Builder
	w, h float64
	id   string // prefix for ids: several SVGs share one HTML document
}

func newSVG(id string, w, h float64) *svg { return &svg{w: w, h: h, id: id} }

func (s *svg) raw(format string, a ...any) { fmt.Fprintf(&s.b, format, a...) }

// attrs renders key/value pairs as attributes (values escaped).
func attrs(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			continue
		}
		fmt.Fprintf(&b, ` %s="%s"`, kv[i], esc(kv[i+1]))
	}
	return b.String()
}

// rect draws a rectangle; title (if any) becomes its tooltip.
func (s *svg) rect(x, y, w, h float64, fill, title string, kv ...string) {
	if title == "" {
		s.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`, num(x), num(y), num(math.Max(w, 0)), num(math.Max(h, 0)), fill, attrs(kv...))
		return
	}
	s.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s><title>%s</title></rect>`, num(x), num(y), num(math.Max(w, 0)), num(math.Max(h, 0)), fill, attrs(kv...), esc(title))
}

func (s *svg) line(x1, y1, x2, y2 float64, stroke string, width float64, kv ...string) {
	s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`, num(x1), num(y1), num(x2), num(y2), stroke, num(width), attrs(kv...))
}

// text draws one label; anchor is start, middle or end.
func (s *svg) text(x, y float64, size float64, anchor, label string, kv ...string) {
	s.raw(`<text x="%s" y="%s" font-size="%s" text-anchor="%s"%s>%s</text>`, num(x), num(y), num(size), anchor, attrs(kv...), esc(label))
}

// open and close groups.
func (s *svg) open(kv ...string) { s.raw("<g%s>", attrs(kv...)) }
func (s *svg) close()            { s.raw("</g>") }

// title adds a tooltip to the enclosing group.
func (s *svg) title(t string) { s.raw("<title>%s</title>", esc(t)) }

// svgStyle holds what thousands of timeline marks share, so each mark
// carries only its own geometry, color and data. Inline SVGs share the
// page's style sheet, so every figure carries the same rules.
const svgStyle = `<style>.sep{stroke:#fff;stroke-width:.5}.lbl{font-size:11px;text-anchor:middle;pointer-events:none}` +
	`.transfer{stroke:#000;stroke-width:1;stroke-opacity:.55}.recompute{opacity:.6;pointer-events:none}</style>`

// String is the finished document, standalone (own xmlns, font, style).
func (s *svg) String() string {
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" id="%s" class="figure" width="%s" height="%s" viewBox="0 0 %s %s" font-family="%s" font-size="%s">`,
		esc(s.id), num(s.w), num(s.h), num(s.w), num(s.h), fontFamily, num(fontSize)) +
		svgStyle + s.b.String() + "</svg>"
}

// legend draws swatches left to right from (x, y); it returns the y below.
func (s *svg) legend(x, y, maxX float64, items []legendItem) float64 {
	cx := x
	for _, it := range items {
		w := 16 + 6 + textWidth(it.label, smallFont) + 16
		if cx+w > maxX && cx > x {
			cx, y = x, y+20
		}
		s.rect(cx, y, 16, 12, it.fill, "", "stroke", it.stroke, "class", "swatch")
		if it.pattern != "" {
			s.rect(cx, y, 16, 12, "url(#"+it.pattern+")", "")
		}
		s.text(cx+22, y+10.5, smallFont, "start", it.label)
		cx += w
	}
	return y + 22
}

type legendItem struct{ fill, stroke, pattern, label string }

// hatch defines a diagonal-line pattern (recomputation, offload) with an
// id unique to this SVG.
func (s *svg) hatch(name, stroke string) string {
	id := s.id + "-" + name
	s.raw(`<defs><pattern id="%s" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="%s" stroke-width="2.5"/></pattern></defs>`, id, stroke)
	return id
}

// niceStep is a 1-2-5 step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || n <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel formats a tick value with as many decimals as the step needs.
func tickLabel(v, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step)))
	}
	return strconv.FormatFloat(v, 'f', d, 64)
}

// seconds formats a duration for tooltips.
func seconds(x float64) string {
	switch {
	case x >= 1:
		return fmt.Sprintf("%.3f s", x)
	case x >= 1e-3:
		return fmt.Sprintf("%.2f ms", x*1e3)
	}
	return fmt.Sprintf("%.1f µs", x*1e6)
}

const gib = 1 << 30

// gbit formats a bytes/s rate in Gbit/s.
func gbit(bytesPerS float64) string {
	g := bytesPerS * 8 / 1e9
	if g >= 100 {
		return fmt.Sprintf("%.0f Gbit/s", g)
	}
	return fmt.Sprintf("%.3g Gbit/s", g)
}
