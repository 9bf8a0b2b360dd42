package search

import (
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// OffloadComparison holds the best plan with CPU offload and the best plan
// without it, so the plan table can say why the chosen plans do (or do not)
// offload: what the other kind would cost, or by how much it misses memory.
type OffloadComparison struct {
	BestWithoutOffload *Alternative `json:"best_without_offload"`
	BestWithOffload    *Alternative `json:"best_with_offload"`
}

// Alternative is the best plan of one kind (with or without offload) or,
// when none of that kind fits, the configuration that missed by least.
type Alternative struct {
	// Considered is how many configs of this kind were evaluated; 0 means
	// the kind was not tried (offload is only tried for configs that do not
	// fit without it, or forbidden or forced by the user).
	Considered int  `json:"considered"`
	Fits       bool `json:"fits"`
	// IterationSeconds and OffloadSeconds (the exposed offload time, part
	// of the iteration) are the best fitting plan's.
	IterationSeconds float64 `json:"iteration_seconds,omitempty"`
	OffloadSeconds   float64 `json:"offload_seconds"`
	Plan             *Plan   `json:"plan,omitempty"`
	// Miss is set when Considered > 0 and nothing of this kind fits.
	Miss *MemoryMiss `json:"miss,omitempty"`
}

// MemoryMiss says where the closest config of a kind runs out of memory.
type MemoryMiss struct {
	Config parallel.Config `json:"config"`
	// Memory is "gpu" or "host" (host memory shared by a node's ranks).
	Memory string `json:"memory"`
	// Stage is the pipeline stage whose GPUs miss (for "gpu").
	Stage         int     `json:"stage"`
	NeedBytes     float64 `json:"need_bytes"`
	CapacityBytes float64 `json:"capacity_bytes"`
	MissBytes     float64 `json:"miss_bytes"`
}

// maxComparePlaced bounds the extra placements spent finding the best plan
// of a kind that the ranked plans do not already contain: candidates are
// in predicted order, so the first that fits is almost always the best.
const maxComparePlaced = 3

// kindTally counts the configs of one kind and remembers its closest miss.
type kindTally struct {
	considered int
	miss       noFit
}

// compareKinds fills the comparison from the placed plans (sorted, not yet
// cut to TopK), placing the best remaining candidates of a kind when no
// placed plan has that kind.
func compareKinds(plans []Plan, cands []candidate, placed map[string]bool, tallies *[2]kindTally, place func(parallel.Config) (Plan, bool)) *OffloadComparison {
	best := func(offload bool) *Alternative {
		t := &tallies[kindIndex(offload)]
		alt := &Alternative{Considered: t.considered}
		var found *Plan
		for i := range plans {
			if plans[i].UsesOffload() == offload {
				found = &plans[i]
				break
			}
		}
		tries := 0
		for _, cand := range cands {
			if cand.cfg.UsesOffload() != offload || placed[cand.key] {
				continue
			}
			if tries >= maxComparePlaced {
				break
			}
			if found != nil && cand.lb >= found.Predicted.IterationSeconds {
				continue
			}
			tries++
			placed[cand.key] = true
			if p, ok := place(cand.cfg); ok && (found == nil || p.Predicted.IterationSeconds < found.Predicted.IterationSeconds) {
				found = &p
			}
		}
		if found != nil {
			p := *found
			alt.Fits, alt.Plan = true, &p
			alt.IterationSeconds, alt.OffloadSeconds = p.Predicted.IterationSeconds, p.Predicted.Breakdown.Offload
		} else if t.miss.seen() {
			alt.Miss = t.miss.memoryMiss()
		}
		return alt
	}
	return &OffloadComparison{BestWithoutOffload: best(false), BestWithOffload: best(true)}
}

func kindIndex(offload bool) int {
	if offload {
		return 1
	}
	return 0
}
