package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// plan --schedules: plan 1 re-priced under each schedule. The 1F1B row of a
// 1F1B plan is the plan's own prediction; the wave is priced, cuts the
// bubble like interleaving does, and is never launchable.
func TestWhatIfSchedules(t *testing.T) {
	c := testCluster([]islandDef{{hosts: 8, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	o := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 64, TopK: 1, Seed: 1,
		Fixed: parallel.Constraints{TP: 8, PP: 8, VPP: 1, MicroBatch: 1, ZeroStage: -1}}
	res, err := Search(c, gpt3_175b, o)
	if err != nil {
		t.Fatal(err)
	}
	p := &res.Plans[0]
	rows := WhatIfSchedules(c, gpt3_175b, p, []string{Schedule1F1B, ScheduleInterleaved, ScheduleWave})
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, w := range rows {
		t.Logf("%-11s chunks %d iter %.3f s bubble %.4f launchable %v %s", w.Schedule, w.ChunksPerRank, w.IterationSeconds, w.BubbleFraction, w.Launchable, w.Note)
		if w.IterationSeconds <= 0 {
			t.Fatalf("%s not priced: %s", w.Schedule, w.Note)
		}
	}
	one, il, wave := rows[0], rows[1], rows[2]
	if !approx(one.IterationSeconds, p.Predicted.IterationSeconds, 1e-9) || !approx(one.BubbleFraction, p.Predicted.BubbleFraction, 1e-9) {
		t.Errorf("1f1b row %.4f s / %.4f, plan 1 predicts %.4f s / %.4f", one.IterationSeconds, one.BubbleFraction, p.Predicted.IterationSeconds, p.Predicted.BubbleFraction)
	}
	if il.ChunksPerRank != 2 || wave.ChunksPerRank != 2 {
		t.Errorf("chunks per rank: interleaved %d, wave %d, want 2 and 2", il.ChunksPerRank, wave.ChunksPerRank)
	}
	if wave.Launchable || !strings.Contains(wave.Note, "not launchable with Megatron-LM/DeepSpeed") {
		t.Errorf("wave row: launchable %v, note %q", wave.Launchable, wave.Note)
	}
	if !one.Launchable || !il.Launchable {
		t.Error("1f1b and interleaved must be launchable with Megatron")
	}
	// 64 micro-batches on 8 stages: 1F1B idles about 7/71 of the time plus
	// the sends; both two-chunk schedules idle less.
	if wave.BubbleFraction >= one.BubbleFraction || il.BubbleFraction >= one.BubbleFraction {
		t.Errorf("bubbles: 1f1b %.3f, interleaved %.3f, wave %.3f", one.BubbleFraction, il.BubbleFraction, wave.BubbleFraction)
	}
	if wave.IterationSeconds >= one.IterationSeconds {
		t.Errorf("wave %.3f s not faster than 1f1b %.3f s", wave.IterationSeconds, one.IterationSeconds)
	}
}

func TestParseSchedules(t *testing.T) {
	got, err := ParseSchedules("1f1b, Wave,interleaved")
	if err != nil || strings.Join(got, ",") != "1f1b,wave,interleaved" {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseSchedules("1f1b,zb-v"); err == nil || !strings.Contains(err.Error(), `"zb-v"`) {
		t.Fatalf("unknown schedule: %v", err)
	}
}

func TestWaveStageLayers(t *testing.T) {
	// 10 layers over 2 ranks x 2 chunks: stages 0..3 get 3,3,2,2; rank 1
	// holds stages 1 (down) and 2 (up), rank 0 stages 0 and 3.
	got := waveStageLayers(10, 2, 2)
	want := []int{3, 3, 2, 2} // [ch0 r0, ch0 r1, ch1 r0 = stage 3, ch1 r1 = stage 2]
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
