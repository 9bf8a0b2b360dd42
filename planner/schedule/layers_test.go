package schedule

import (
	"math/rand/v2"
	"testing"
)

// bruteSplit enumerates every split with at least one layer per stage.
func bruteSplit(per, fixed []float64, total int) float64 {
	best := -1.0
	split := make([]int, len(per))
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == len(per)-1 {
			split[i] = left
			if t := StageMaxTime(per, fixed, split); best < 0 || t < best {
				best = t
			}
			return
		}
		for k := 1; k <= left-(len(per)-1-i); k++ {
			split[i] = k
			rec(i+1, left-k)
		}
	}
	rec(0, total)
	return best
}

func TestBalanceLayersOptimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.IntN(4)
		total := n + rng.IntN(14)
		per := make([]float64, n)
		fixed := make([]float64, n)
		for i := range per {
			per[i] = 0.5 + rng.Float64()*2
			if rng.IntN(3) == 0 {
				fixed[i] = rng.Float64() * 3
			}
		}
		got, err := BalanceLayers(per, fixed, total)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, x := range got {
			if x < 1 {
				t.Fatalf("stage with %d layers: %v", x, got)
			}
			sum += x
		}
		if sum != total {
			t.Fatalf("split %v sums to %d, want %d", got, sum, total)
		}
		if g, w := StageMaxTime(per, fixed, got), bruteSplit(per, fixed, total); g > w*(1+1e-12) {
			t.Fatalf("per=%v fixed=%v total=%d: split %v max %g, optimum %g", per, fixed, total, got, g, w)
		}
	}
}

// A stage twice as fast gets twice the layers (Holmes' heterogeneous split:
// 48 layers, fast island 32, slow 16).
func TestBalanceLayersFasterGetsMore(t *testing.T) {
	got, _ := BalanceLayers([]float64{1, 2}, []float64{0, 0}, 48)
	if got[0] != 32 || got[1] != 16 {
		t.Fatalf("split %v, want [32 16]", got)
	}
	if _, err := BalanceLayers([]float64{1, 1, 1}, []float64{0, 0, 0}, 2); err == nil {
		t.Fatal("2 layers over 3 stages accepted")
	}
}
