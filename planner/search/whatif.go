package search

import (
	"fmt"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// Schedule names for ScheduleWhatIfs (plan --schedules).
const (
	Schedule1F1B        = "1f1b"
	ScheduleInterleaved = "interleaved"
	ScheduleWave        = "wave"
)

// ScheduleWhatIf is a placed plan re-priced under another pipeline
// schedule: same TP/PP/DP, micro-batch, placement and recomputation, only
// the split of each rank's layers into chunks and their order change.
// Memory is not re-estimated. The wave is Hanayo's (Liu et al., SC'23):
// neither Megatron-LM nor DeepSpeed can run it, so it is never chosen or
// rendered, only shown.
type ScheduleWhatIf struct {
	Schedule string `json:"schedule"`
	// ChunksPerRank is VPP for interleaving, 2 x waves for the wave.
	ChunksPerRank    int     `json:"chunks_per_rank"`
	IterationSeconds float64 `json:"iteration_seconds"`
	BubbleFraction   float64 `json:"bubble_fraction"`
	Launchable       bool    `json:"launchable"`
	// Note says why a schedule could not be priced, or what it assumes.
	Note string `json:"note,omitempty"`
}

// ParseSchedules checks a comma-separated --schedules list.
func ParseSchedules(list string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		switch s {
		case "":
			continue
		case Schedule1F1B, ScheduleInterleaved, ScheduleWave:
			out = append(out, s)
		default:
			return nil, fmt.Errorf("--schedules: unknown schedule %q: use 1f1b, interleaved or wave, comma-separated", s)
		}
	}
	return out, nil
}

// WhatIfSchedules prices plan p (placed, Megatron or DeepSpeed) under each
// named schedule with the event simulator. Interleaving uses p's VPP when
// it has one, else 2; the wave uses as many chunks per rank (at least 2,
// rounded up to even), so the two compare at equal message counts.
func WhatIfSchedules(c *cluster.Cluster, m model.Model, p *Plan, schedules []string) []ScheduleWhatIf {
	chunks := max(p.VPP, 2)
	out := make([]ScheduleWhatIf, 0, len(schedules))
	for _, s := range schedules {
		w := ScheduleWhatIf{Schedule: s, Launchable: s != ScheduleWave}
		cfg := p.Config
		switch s {
		case Schedule1F1B:
			w.ChunksPerRank = 1
			if cfg.VPP > 1 {
				cfg.VPP, cfg.StageLayers = 1, evenLayers(m.NumLayers, cfg.PP)
			}
		case ScheduleInterleaved:
			w.ChunksPerRank = chunks
			if p.Framework == parallel.FrameworkDeepSpeed {
				w.Launchable = false
				w.Note = "DeepSpeed's pipeline engine has no interleaved schedule"
			}
			if cfg.VPP != chunks {
				cfg.VPP, cfg.StageLayers = chunks, evenLayers(m.NumLayers, cfg.PP*chunks)
			}
		case ScheduleWave:
			w.ChunksPerRank = chunks + chunks%2
			w.Note = "not launchable with Megatron-LM/DeepSpeed (Hanayo's wave schedule); memory not re-estimated"
			cfg.VPP, cfg.StageLayers = w.ChunksPerRank, waveStageLayers(m.NumLayers, cfg.PP, w.ChunksPerRank)
		}
		if why := whatIfUnpriceable(m, cfg, s); why != "" {
			w.Note = why
			out = append(out, w)
			continue
		}
		tl, err := planTimeline(c, m, p, cfg, s == ScheduleWave)
		if err != nil {
			w.Note = err.Error()
			out = append(out, w)
			continue
		}
		w.IterationSeconds = tl.IterationSeconds
		w.BubbleFraction = timelineBubble(tl)
		out = append(out, w)
	}
	return out
}

// whatIfUnpriceable says why cfg cannot run schedule s ("" if it can).
func whatIfUnpriceable(m model.Model, cfg parallel.Config, s string) string {
	if cfg.PP < 2 && s != Schedule1F1B {
		return "needs pipeline parallelism (PP >= 2)"
	}
	if cfg.VPP > 1 && m.NumLayers < cfg.PP*cfg.VPP {
		return fmt.Sprintf("%d layers cannot fill %d x %d chunks", m.NumLayers, cfg.PP, cfg.VPP)
	}
	if s == ScheduleInterleaved && cfg.NumMicroBatches%cfg.PP != 0 {
		return fmt.Sprintf("interleaving needs micro-batches (%d) divisible by PP (%d)", cfg.NumMicroBatches, cfg.PP)
	}
	return ""
}

// waveStageLayers splits layers evenly over the wave's PP*chunks stages
// and lays them out as StageLayers[ch*PP+r]: chunk ch of rank r is global
// stage ch*PP+r for even ch and ch*PP+PP-1-r for odd ch.
func waveStageLayers(layers, pp, chunks int) []int {
	even := evenLayers(layers, pp*chunks)
	out := make([]int, pp*chunks)
	for ch := 0; ch < chunks; ch++ {
		for r := 0; r < pp; r++ {
			s := ch*pp + r
			if ch%2 == 1 {
				s = ch*pp + pp - 1 - r
			}
			out[ch*pp+r] = even[s]
		}
	}
	return out
}

// timelineBubble is the drawn pipeline's idle share up to its makespan.
func timelineBubble(t *Timeline) float64 {
	if t.Makespan <= 0 || t.Stages == 0 {
		return 0
	}
	busy := 0.0
	for _, op := range t.Ops {
		busy += op.End - op.Start
	}
	return 1 - busy/(t.Makespan*float64(t.Stages))
}
