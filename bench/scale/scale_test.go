package main

import (
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// BenchmarkPlanScale is `plan --model llama2-70b --top 1
// --global-batch-size 2048` in-process (cluster resolution and the full
// search, without the CLI's second "ignoring islands" search) on the
// generated clusters from 1k to 64k GPUs. The 64k measured matrix is
// 8,192 x 8,192 host pairs. Run one size with, for example,
// -bench 'PlanScale/three-islands/16k'.
func BenchmarkPlanScale(b *testing.B) {
	m, err := model.Preset("llama2-70b")
	if err != nil {
		b.Fatal(err)
	}
	for _, kind := range Kinds {
		for _, size := range Sizes {
			b.Run(kind+"/"+size.Name, func(b *testing.B) {
				f, err := Generate(kind, size.Hosts)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					c, err := f.Resolve()
					if err != nil {
						b.Fatal(err)
					}
					res, err := search.Search(c, m, search.Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 2048, TopK: 1, Seed: 1})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(res.Plans[0].Predicted.IterationSeconds, "iter-s")
				}
			})
		}
	}
}

// The generator builds what it says: host counts, three islands in 2:1:1,
// and a measured matrix whose rows alias per rack.
func TestGenerate(t *testing.T) {
	for _, kind := range Kinds {
		f, err := Generate(kind, 128)
		if err != nil {
			t.Fatal(err)
		}
		c, err := f.Resolve()
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got := c.TotalGPUs(); got != 1024 {
			t.Errorf("%s: %d GPUs, want 1024", kind, got)
		}
		if kind == "homogeneous" {
			continue
		}
		var per []int
		for _, isl := range c.Islands {
			per = append(per, len(isl.Hosts))
		}
		if len(per) != 3 || per[0] != 64 || per[1] != 32 || per[2] != 32 {
			t.Errorf("%s: island sizes %v, want [64 32 32]", kind, per)
		}
		// H100 to L40S is the 50 Gbit/s link, in both kinds (the measured
		// matrix repeats it between islands).
		if l := c.LinkBetween(0, 127); l.BytesPerS != 50e9/8 {
			t.Errorf("%s: h100-l40s link %g B/s, want 50 Gbit/s", kind, l.BytesPerS)
		}
	}
	if _, err := Generate("nope", 8); err == nil {
		t.Error("unknown kind accepted")
	}
	f, _ := Generate("measured-matrix", 128)
	c, _ := f.Resolve()
	// Host 63 of the H100 island has the degraded NIC: half of 0.8 x 200.
	if l := c.LinkBetween(0, 63); l.BytesPerS != 0.4*200e9/8 {
		t.Errorf("degraded host link %g B/s, want 80 Gbit/s", l.BytesPerS)
	}
	if l := c.LinkBetween(0, 1); l.BytesPerS != 200e9/8 {
		t.Errorf("same-rack link %g B/s, want 200 Gbit/s", l.BytesPerS)
	}
}
