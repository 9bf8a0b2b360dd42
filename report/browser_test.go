package report

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateShot = flag.Bool("update", false, "rewrite docs/report-two-clusters.png from the browser test")

// The browser's window: wide enough for the 1120-pixel figures and the
// page's padding, tall enough for the why-section and plan 1's figures.
const (
	shotWidth  = 1200
	shotHeight = 2300
)

// chromium runs Debian's headless Chromium on a file with a fresh
// profile, no network and console messages logged to stderr.
func chromium(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("headless Chromium is missing: the report's browser test needs Debian's chromium (apt-get install chromium; .ci/install-deps installs it)")
	}
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
		// Nothing may be fetched: every host name resolves to nothing.
		"--host-resolver-rules=MAP * ~NOTFOUND",
		"--force-device-scale-factor=1", "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", shotWidth, shotHeight)}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errOut.String())
	}
	return out.String(), errOut.String()
}

// consoleRE matches a page's console messages in Chromium's log.
var consoleRE = regexp.MustCompile(`(?m)^.*:CONSOLE[:(].*$`)

// The console check itself must catch errors: a page that logs one and
// throws is flagged.
func TestBrowserConsoleCheckCatchesErrors(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "bad.html")
	if err := os.WriteFile(page, []byte(`<!DOCTYPE html><html><body><script>console.error("planted"); nosuchfn();</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, log := chromium(t, "--dump-dom", "file://"+page)
	msgs := consoleRE.FindAllString(log, -1)
	if len(msgs) < 2 || !strings.Contains(strings.Join(msgs, "\n"), "planted") {
		t.Fatalf("the console check missed the planted errors; Chromium's log:\n%s", log)
	}
}

// layoutBox is one figure's rendered box, as the browser measured it.
type layoutBox struct {
	ID         string
	X, Y, W, H float64
}

// measureScript records each figure's box and the page's scroll width in
// a body attribute that --dump-dom prints. It goes into a copy of the
// page only: the report itself has no script.
const measureScript = `<script>
const boxes = [...document.querySelectorAll("svg.figure")].map(s => {
  const r = s.getBoundingClientRect();
  return {ID: s.id, X: r.x + scrollX, Y: r.y + scrollY, W: r.width, H: r.height};
});
document.body.setAttribute("data-layout", JSON.stringify({Boxes: boxes, ScrollWidth: document.documentElement.scrollWidth}));
</script>`

// Chromium renders the two-cluster report with no console message, each
// figure at its drawn size with nothing spilling sideways, and the
// screenshot shows each figure in the box the layout gives it.
func TestReportInChromium(t *testing.T) {
	_, r := exampleReport(t)
	dir := t.TempDir()
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "plan.html")
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	measured := filepath.Join(dir, "measured.html")
	withScript := strings.Replace(b.String(), "</body>", measureScript+"</body>", 1)
	if err := os.WriteFile(measured, []byte(withScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two runs: the copy with the measuring script for the layout, the
	// report itself for the screenshot; both must log no console message.
	dom, log := chromium(t, "--dump-dom", "file://"+measured)
	if msgs := consoleRE.FindAllString(log, -1); len(msgs) > 0 {
		t.Fatalf("console messages measuring the report:\n%s", strings.Join(msgs, "\n"))
	}
	layout := parseLayout(t, dom)
	want := figureSizes(t, r)
	if len(layout.Boxes) != len(want) {
		t.Fatalf("browser found %d figures, the report has %d", len(layout.Boxes), len(want))
	}
	for _, box := range layout.Boxes {
		w, ok := want[box.ID]
		if !ok {
			t.Errorf("unexpected figure %q", box.ID)
			continue
		}
		if abs(box.W-w[0]) > 1 || abs(box.H-w[1]) > 1 {
			t.Errorf("figure %s rendered %.0fx%.0f, drawn %.0fx%.0f", box.ID, box.W, box.H, w[0], w[1])
		}
	}
	if layout.ScrollWidth > shotWidth {
		t.Errorf("page is %d px wide in a %d px window: something spills sideways", layout.ScrollWidth, shotWidth)
	}
	shot := filepath.Join(dir, "shot.png")
	_, log = chromium(t, "--screenshot="+shot, "file://"+page)
	if msgs := consoleRE.FindAllString(log, -1); len(msgs) > 0 {
		t.Errorf("console messages rendering the report:\n%s", strings.Join(msgs, "\n"))
	}
	img := readPNG(t, shot)
	if b := img.Bounds(); b.Dx() != shotWidth || b.Dy() != shotHeight {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), shotWidth, shotHeight)
	}
	checkScreenshot(t, img, layout.Boxes)
	if *updateShot {
		data, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/report-two-clusters.png", data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type pageLayout struct {
	Boxes       []layoutBox
	ScrollWidth int
}

func parseLayout(t *testing.T, dom string) pageLayout {
	t.Helper()
	m := regexp.MustCompile(`data-layout="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the measuring script did not run; DOM starts:\n%.500s", dom)
	}
	var l pageLayout
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// figureSizes is each figure's drawn width and height from its SVG.
func figureSizes(t *testing.T, r *Report) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, f := range r.Figures() {
		svg := parseSVG(t, string(f.SVG))
		w, _ := strconv.ParseFloat(svg.attr("width"), 64)
		h, _ := strconv.ParseFloat(svg.attr("height"), 64)
		out[svg.attr("id")] = [2]float64{w, h}
	}
	return out
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// checkScreenshot compares the picture with the layout: every figure
// inside the window has ink in its box (and the plan-1 timeline its
// chunk colors), and the strip just right of each box is page background.
func checkScreenshot(t *testing.T, img image.Image, boxes []layoutBox) {
	t.Helper()
	seen := 0
	for _, b := range boxes {
		if b.Y+b.H > shotHeight {
			continue
		}
		seen++
		x0, y0, x1, y1 := int(b.X), int(b.Y), int(b.X+b.W), int(b.Y+b.H)
		ink, colors := 0, map[uint32]bool{}
		for y := y0; y < y1; y += 2 {
			for x := x0; x < x1; x += 2 {
				r, g, bl, _ := img.At(x, y).RGBA()
				if r>>8 < 240 || g>>8 < 240 || bl>>8 < 240 {
					ink++
				}
				colors[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			}
		}
		if frac := float64(ink) / float64((x1-x0)*(y1-y0)/4); frac < 0.02 {
			t.Errorf("figure %s: only %.1f%% of its box is drawn in the screenshot", b.ID, 100*frac)
		}
		if b.ID == "plan1-timeline" {
			for _, c := range []uint32{0x0072B2, 0xE69F00} {
				if !colors[c] {
					t.Errorf("timeline box lacks chunk color #%06X", c)
				}
			}
		}
		for y := y0; y < y1; y++ {
			for x := x1 + 2; x < min(x1+12, shotWidth); x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r>>8 < 250 || g>>8 < 250 || bl>>8 < 250 {
					t.Errorf("figure %s: ink at (%d,%d), right of its box", b.ID, x, y)
					return
				}
			}
		}
	}
	if seen < 3 {
		t.Errorf("only %d figures inside the %d px window; the screenshot should show the breakdown and plan 1's first figures", seen, shotHeight)
	}
}
