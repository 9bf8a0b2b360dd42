package search

import (
	"fmt"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// CompactLayers writes a layer split as runs, the way the plan table and
// the report show it: "26*2 22*2" is two stages of 26 layers then two of 22.
func CompactLayers(layers []int) string {
	var parts []string
	for i := 0; i < len(layers); {
		j := i
		for j < len(layers) && layers[j] == layers[i] {
			j++
		}
		if j-i == 1 {
			parts = append(parts, fmt.Sprint(layers[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d*%d", layers[i], j-i))
		}
		i = j
	}
	return strings.Join(parts, " ")
}

// OptimizerLabel names a plan's optimizer sharding: zero-N for DeepSpeed,
// distopt for Megatron's distributed optimizer, else plain.
func (p *Plan) OptimizerLabel() string {
	switch {
	case p.Framework == parallel.FrameworkDeepSpeed:
		return fmt.Sprintf("zero-%d", p.ZeroStage)
	case p.DistributedOptimizer:
		return "distopt"
	}
	return "plain"
}
