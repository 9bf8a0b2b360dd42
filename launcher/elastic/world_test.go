package elastic

import (
	"fmt"
	"slices"
	"testing"
)

// TestKeepForWorld: when the whole of the hosts is not a world size the
// job accepts, the largest accepted size below it that at least MIN hosts
// reach wins, with the fewest hosts left out, the earliest kept.
func TestKeepForWorld(t *testing.T) {
	for _, c := range []struct {
		name  string
		ranks []int
		min   int
		valid []int
		want  []int // nil: none
	}{
		{"alike: the first 3", []int{2, 2, 2, 2}, 1, []int{1, 2, 3, 6}, []int{0, 1, 2}},
		{"alike: the largest valid size", []int{1, 1, 1, 1, 1, 1, 1, 1}, 1, []int{2, 3, 4, 5, 6}, []int{0, 1, 2, 3, 4, 5}},
		{"alike: below MIN", []int{2, 2, 2, 2}, 4, []int{1, 2, 3, 6}, nil},
		{"alike: none at all", []int{4, 4, 4}, 1, []int{1, 2, 3, 6}, nil},
		{"unlike: the fewest left out", []int{2, 1, 2, 1}, 1, []int{4}, []int{0, 1, 3}},
		{"unlike: the earliest kept", []int{2, 1, 2, 1}, 1, []int{5}, []int{0, 1, 2}},
		{"unlike: the largest size first", []int{4, 2, 1}, 1, []int{1, 4, 5}, []int{0, 2}},
		{"unlike: below MIN", []int{4, 2, 1}, 3, []int{1, 4, 5}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			got, ok := KeepForWorld(c.ranks, c.min, func(keep []int) bool {
				world := 0
				for _, i := range keep {
					world += c.ranks[i]
				}
				asked = append(asked, fmt.Sprint(keep))
				return slices.Contains(c.valid, world)
			})
			if ok != (c.want != nil) || !slices.Equal(got, c.want) {
				t.Errorf("kept %v (%v), want %v; asked %v", got, ok, c.want, asked)
			}
		})
	}
}
