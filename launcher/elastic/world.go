package elastic

// KeepForWorld picks the hosts an attempt runs on when the job accepts
// only some world sizes (DeepSpeed's elasticity section lists its valid
// GPU counts) and the whole of its hosts is not one: ranks[i] is the i-th
// host's ranks, in the job's host order. It tries the world sizes below
// the whole's that at least min hosts reach, largest first, each with the
// most hosts that reach it (the fewest left out) and, of those, the
// earliest in order; fits says whether the job accepts those hosts (their
// indices, ascending). It returns the first accepted, or false when none
// is.
func KeepForWorld(ranks []int, min int, fits func(keep []int) bool) ([]int, bool) {
	total := 0
	for _, r := range ranks {
		total += r
	}
	n := len(ranks)
	if uniform(ranks) || n*(total+1) > maxWorldCells {
		// Hosts alike (or too many to weigh each subset): the first k.
		for k := n - 1; k >= max(min, 1); k-- {
			keep := make([]int, k)
			for i := range keep {
				keep[i] = i
			}
			if fits(keep) {
				return keep, true
			}
		}
		return nil, false
	}
	// most[i][s]: the most hosts of i..n-1 whose ranks sum to s (-1: none).
	most := make([][]int16, n+1)
	for i := n; i >= 0; i-- {
		most[i] = make([]int16, total+1)
		for s := range most[i] {
			most[i][s] = -1
		}
		most[i][0] = 0
		if i == n {
			continue
		}
		for s := 0; s <= total; s++ {
			most[i][s] = most[i+1][s]
			if r := ranks[i]; s >= r && most[i+1][s-r] >= 0 {
				most[i][s] = max(most[i][s], most[i+1][s-r]+1)
			}
		}
	}
	for s := total - 1; s > 0; s-- {
		if int(most[0][s]) < max(min, 1) {
			continue
		}
		// Earliest first: take host i whenever the rest still reach the
		// most hosts for what is left of s.
		var keep []int
		left := s
		for i := 0; i < n && left > 0; i++ {
			if r := ranks[i]; left >= r && most[i+1][left-r] >= 0 && most[i+1][left-r]+1 == most[i][left] {
				keep = append(keep, i)
				left -= r
			}
		}
		if fits(keep) {
			return keep, true
		}
	}
	return nil, false
}

// maxWorldCells bounds KeepForWorld's table (hosts x ranks, 2 bytes each).
const maxWorldCells = 1 << 24

func uniform(ranks []int) bool {
	for _, r := range ranks {
		if r != ranks[0] {
			return false
		}
	}
	return true
}
