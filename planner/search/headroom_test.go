package search

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// TestNoFitNamesTheHeadroom: a pinned configuration whose estimate misses
// the GPU by less than --memory-headroom keeps free is refused with the
// headroom that lets it through named first (a user who knows it runs,
// e.g. NVIDIA's tuned FP8 recipes, which run inside that margin), and that
// headroom does let it through; a miss larger than the headroom, or with no
// headroom, names none.
func TestNoFitNamesTheHeadroom(t *testing.T) {
	m := model.Model{Name: "13b", NumLayers: 40, Hidden: 5120, Heads: 40, SeqLength: 2048, Vocab: 50257}
	distOpt := true
	fixed := parallel.Constraints{TP: 8, PP: 1, DP: 2, MicroBatch: 4, Recompute: parallel.RecomputeNone, ZeroStage: -1,
		DistributedOptimizer: &distOpt, NoOffload: true, Precision: gpu.PrecisionBF16}
	search := func(gpuGiB, headroom float64) (*Result, error) {
		g := gpuA100
		g.MemoryGiB = gpuGiB
		c := testCluster([]islandDef{{hosts: 2, gpus: 8, gpu: g, intraGBs: 300, nicGbit: 800}}, 10)
		return Search(c, m, Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, Fixed: fixed, TopK: 1, Seed: 1, MemoryHeadroom: headroom})
	}
	res, err := search(1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	peak := res.Plans[0].Memory.PeakBytesPerGPU / gpu.GiB
	for _, c := range []struct {
		name           string
		gpuGiB, headrm float64
		want           string // the suggestion's headroom; "": none
	}{
		{"within the headroom", peak / 0.975, 0.05, "0.02"},
		{"within a larger headroom", peak / 0.885, 0.2, "0.11"},
		{"beyond the headroom", peak / 1.1, 0.05, ""},
		{"no headroom", peak / 1.01, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := search(c.gpuGiB, c.headrm)
			var nf *NoFitError
			if !errors.As(err, &nf) {
				t.Fatalf("err %v: want a *NoFitError", err)
			}
			named := strings.Contains(err.Error(), "--memory-headroom ")
			if c.want == "" {
				if named {
					t.Fatalf("%v: want no headroom suggested", err)
				}
				return
			}
			if !named || !strings.HasPrefix(nf.Suggestions[0], "--memory-headroom "+c.want+" if this configuration is known to run") {
				t.Fatalf("%v: want --memory-headroom %s suggested first", err, c.want)
			}
			t.Logf("%v", err)
			h, _ := strconv.ParseFloat(c.want, 64)
			if _, err := search(c.gpuGiB, h); err != nil {
				t.Fatalf("with the suggested --memory-headroom %s: %v", c.want, err)
			}
		})
	}
}
