package calibration

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
)

// predictedWith is run r's prediction under cal (the linearisation).
func predictedWith(r calib.Run, cal *calib.Calibration) float64 {
	f := cal.Factors()
	t := r.FixedS
	for k, part := range r.PartsS {
		x := f[k]
		if x <= 0 {
			x = 1
		}
		t += part / r.FactorAtRun(k) * x
	}
	return t
}

// Issue 22: two runs of one model whose link parts are small gave
// "inter_host 0.050, intra_host 0.050" and a 29% error on the run the
// factors were fitted to. Factors no run gives 5% of its time are left as
// they were; the others are fitted, and the fitted runs come out right.
func TestFitCalibrationLeavesUnconstrainedFactors(t *testing.T) {
	runs := []calib.Run{
		{ObservedS: 13, PredictedS: 10, FixedS: 0.5, PartsS: map[string]float64{calib.ComputeFactorKey: 9, "intra_host a": 0.4, "inter_host a": 0.1}},
		{ObservedS: 6.2, PredictedS: 5, FixedS: 0.2, PartsS: map[string]float64{calib.ComputeFactorKey: 4.6, "intra_host a": 0.1, "inter_host a": 0.1}},
	}
	cal := Fit(runs, time.Unix(0, 0))
	f := cal.Factors()
	for _, k := range []string{"intra_host a", "inter_host a"} {
		if f[k] != 1 {
			t.Errorf("%s = %.3f: no run gives it 5%% of its time, want it untouched (1)", k, f[k])
		}
	}
	for i, r := range runs {
		if e := predictedWith(r, cal)/r.ObservedS - 1; math.Abs(e) > 0.05 {
			t.Errorf("run %d: fitted prediction off by %+.1f%% (%s)", i, 100*e, cal.Summary())
		}
	}
}

// Issue 22: one outlier run (measured 2x its neighbour) moved the NVSwitch
// factor to 5-6x, making the other TP8 runs 64-81% too slow. With Huber
// weights the consistent runs decide.
func TestFitCalibrationDownWeightsOutlier(t *testing.T) {
	mk := func(compute, intra, observed float64) calib.Run {
		return calib.Run{ObservedS: observed, PredictedS: compute + intra, PartsS: map[string]float64{calib.ComputeFactorKey: compute, "intra_host a": intra}}
	}
	// The true system is 10% slower in compute, 20% on the bus.
	truth := func(c, i float64) float64 { return 1.1*c + 1.2*i }
	runs := []calib.Run{
		mk(8, 2, truth(8, 2)), mk(6, 3, truth(6, 3)), mk(10, 1.5, truth(10, 1.5)), mk(5, 2.5, truth(5, 2.5)),
		mk(3, 3, 2*truth(3, 3)), // the outlier, bus-heavy like a TP8 run
	}
	cal := Fit(runs, time.Unix(0, 0))
	for i, r := range runs[:4] {
		if e := predictedWith(r, cal)/r.ObservedS - 1; math.Abs(e) > 0.05 {
			t.Errorf("consistent run %d: off by %+.1f%% after calibrating (%s)", i, 100*e, cal.Summary())
		}
	}
	if x := cal.Factors()["intra_host a"]; x > 1.5 {
		t.Errorf("intra_host factor %.2f: the outlier moved it", x)
	}
}

// A correction as small as the runs' own scatter is not applied (calibrating
// must not make predictions worse); a large consistent one is.
func TestFitCalibrationShrinksNoise(t *testing.T) {
	mk := func(observed float64) calib.Run {
		return calib.Run{ObservedS: observed, PredictedS: 10, PartsS: map[string]float64{calib.ComputeFactorKey: 10}}
	}
	noisy := Fit([]calib.Run{mk(10.6), mk(9.3), mk(10.2)}, time.Unix(0, 0))
	if x := noisy.Compute.Factor; math.Abs(x-1) > 0.01 {
		t.Errorf("runs at +6%%, -7%%, +2%% moved compute to %.3f, want 1 within 1%%", x)
	}
	off := Fit([]calib.Run{mk(13.1), mk(12.7), mk(13.3)}, time.Unix(0, 0))
	if x := off.Compute.Factor; math.Abs(x/1.3-1) > 0.03 {
		t.Errorf("runs 27-33%% slow moved compute to %.3f, want ~1.30", x)
	}
}

// One run: the fit moves the prediction onto the observation.
func TestFitCalibrationOneRun(t *testing.T) {
	r := calib.Run{ObservedS: 2, PredictedS: 1, PartsS: map[string]float64{calib.ComputeFactorKey: 0.8, "inter_host a": 0.2}}
	cal := Fit([]calib.Run{r}, time.Unix(0, 0))
	pred := 0.8*cal.Compute.Factor + 0.2*cal.Factors()["inter_host a"]
	if math.Abs(pred/2-1) > 0.05 {
		t.Errorf("calibrated prediction %g s, observed 2 s (%s)", pred, cal.Summary())
	}
	if got := cal.Summary(); !strings.HasPrefix(got, "calibrated from 1 runs, last error 50.0%") {
		t.Errorf("summary %q", got)
	}
}

// A run recorded under a calibration: its parts are scaled by the factors
// then in force, and the refit is relative to them.
func TestFitCalibrationRelativeToFactorsAtRun(t *testing.T) {
	r := calib.Run{ObservedS: 3, PredictedS: 2, PartsS: map[string]float64{calib.ComputeFactorKey: 2},
		Factors: map[string]float64{calib.ComputeFactorKey: 2}}
	cal := Fit([]calib.Run{r}, time.Unix(0, 0))
	// One run's correction is shrunk by 1 - 2 x 8%^2 / 67%^2 in log space
	// (Fit: a single run's error may be its own scatter): ~2.9.
	if math.Abs(cal.Compute.Factor/3-1) > 0.05 || cal.Compute.Observations != 1 {
		t.Errorf("compute %+v, want ~3 (raw part 1 s, observed 3 s)", cal.Compute)
	}
}

// syntheticRuns are n runs whose compute, bus and inter-host parts vary as
// a table's configurations do, observed at bias x the model's prediction
// with a log-normal per-run scatter of sd (what the model misses between
// configurations).
func syntheticRuns(rng *rand.Rand, n int, bias, sd float64) []calib.Run {
	runs := make([]calib.Run, n)
	for i := range runs {
		c := 5 + 5*rng.Float64()
		parts := map[string]float64{calib.ComputeFactorKey: c, "intra_host a": c * (0.05 + 0.35*rng.Float64()), "inter_host a": c * 0.3 * rng.Float64()}
		pred := 0.0
		for _, p := range parts {
			pred += p
		}
		runs[i] = calib.Run{PredictedS: pred, PartsS: parts, ObservedS: pred * bias * math.Exp(sd*rng.NormFloat64())}
	}
	return runs
}

// calibratedMAPE fits on 3 runs of runs at a time (draws seeded draws) and
// returns the mean absolute relative error of the other runs before and
// after calibrating, averaged over the draws.
func calibratedMAPE(rng *rand.Rand, runs []calib.Run, draws int) (before, after float64) {
	for range draws {
		perm := rng.Perm(len(runs))
		var fit []calib.Run
		for _, i := range perm[:3] {
			fit = append(fit, runs[i])
		}
		cal := Fit(fit, time.Unix(0, 0))
		for _, i := range perm[3:] {
			r := runs[i]
			before += math.Abs(r.PredictedS/r.ObservedS - 1)
			after += math.Abs(predictedWith(r, cal)/r.ObservedS - 1)
		}
	}
	n := float64(draws * (len(runs) - 3))
	return before / n, after / n
}

// Issue 22: calibrating on 3 of a table's runs made its other runs worse.
// A cluster the model prices without bias, whose runs scatter by 8% (the
// published tables' scatter), must not get worse from 3 runs' calibration
// (2% of its error allowed); one 25% slower than the model must lose 40%
// of its error. The old fit (independent factors under a weak prior, then
// James-Stein) left 0.65x: it spread the correction over link factors that
// three runs cannot tell apart.
func TestFitCalibrationThreeRunsHelpOrStay(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bias     float64
		maxRatio float64 // after / before
	}{
		{"no bias, 8% scatter", 1, 1.02},
		{"25% slow, 8% scatter", 1.25, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(22, 3))
			runs := syntheticRuns(rng, 40, tc.bias, 0.08)
			before, after := calibratedMAPE(rng, runs, 60)
			t.Logf("rest MAPE %.2f%% -> %.2f%%", 100*before, 100*after)
			if after > tc.maxRatio*before {
				t.Errorf("after calibrating on 3 runs the rest is off by %.2f%%, before %.2f%%: want at most %.2fx", 100*after, 100*before, tc.maxRatio)
			}
		})
	}
}

// Issue 22: calibrating on 3 runs made the other runs worse when the runs
// erred in opposite directions by configuration (Megatron-Bridge's 70B
// rows +9%, its 405B rows -10%): any 3 of them pass as a cluster off the
// model, and the correction they share moves the fourth further off
// (10.7% -> 11.8%). Fit predicts each run from the others and keeps only
// the share of the correction that does that; runs that agree keep it all.
func TestFitCalibrationCrossValidates(t *testing.T) {
	mk := func(predicted, observed float64) calib.Run {
		return calib.Run{ObservedS: observed, PredictedS: predicted, PartsS: map[string]float64{calib.ComputeFactorKey: predicted}}
	}
	for _, tc := range []struct {
		name      string
		fit       []calib.Run
		next      calib.Run // a run the fit did not see
		wantFolds int
		maxKept   float64
		minKept   float64
	}{
		{name: "70B +9%, 405B -10%, 70B +10%; next a 405B run",
			fit:       []calib.Run{mk(21.9, 20.2), mk(35.3, 39.5), mk(11.1, 10.2)},
			next:      mk(12.3, 14.0),
			wantFolds: 3, maxKept: 0.5},
		{name: "four runs 18-22% slow",
			fit:       []calib.Run{mk(10, 12.2), mk(5, 5.9), mk(20, 24.4), mk(8, 9.6)},
			next:      mk(12, 14.5),
			wantFolds: 4, minKept: 1},
		{name: "two runs: too few to hold one out",
			fit:  []calib.Run{mk(10, 12.2), mk(5, 4.4)},
			next: mk(12, 14.5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := Fit(tc.fit, time.Unix(0, 0))
			cv := cal.CrossValidation
			if tc.wantFolds == 0 {
				if cv != nil {
					t.Fatalf("cross-validation %+v on %d runs, want none", *cv, len(tc.fit))
				}
				return
			}
			if cv == nil || cv.Folds != tc.wantFolds {
				t.Fatalf("cross-validation %+v, want %d folds", cv, tc.wantFolds)
			}
			if cv.Kept > max(tc.maxKept, tc.minKept) || cv.Kept < tc.minKept {
				t.Errorf("kept %.2f of the correction, want %.2f-%.2f", cv.Kept, tc.minKept, max(tc.maxKept, tc.minKept))
			}
			before := math.Abs(tc.next.PredictedS/tc.next.ObservedS - 1)
			after := math.Abs(predictedWith(tc.next, cal)/tc.next.ObservedS - 1)
			t.Logf("compute x%.3f, kept %.2f: next run %.1f%% -> %.1f%%", cal.Compute.Factor, cv.Kept, 100*before, 100*after)
			if after > before+0.005 {
				t.Errorf("calibrating made the next run worse: %.1f%% -> %.1f%% (compute x%.3f)", 100*before, 100*after, cal.Compute.Factor)
			}
		})
	}
}

// Issue 29: three runs the model prices as compute alone, two observed
// about 55% above it and one on it (vTrain's 39.1B TP2 PP8, TP4 PP4, TP2
// PP16). The robust weights took the agreeing run for the outlier and the
// correction of the other two (compute x1.57) was applied in full. The
// runs disagree beyond their noise: nothing the folds do not support is
// kept, and the two runs still off are named.
func TestFitCalibrationNamesDisagreeingRuns(t *testing.T) {
	mk := func(predicted, observed float64) calib.Run {
		return calib.Run{ObservedS: observed, PredictedS: predicted, PartsS: map[string]float64{calib.ComputeFactorKey: predicted}}
	}
	cal := Fit([]calib.Run{mk(14.33, 21.89), mk(13.51, 13.88), mk(15.01, 23.75)}, time.Unix(0, 0))
	cv := cal.CrossValidation
	if cv == nil || len(cv.Disagreeing) != 2 || cv.Disagreeing[0] != 0 || cv.Disagreeing[1] != 2 {
		t.Fatalf("cross-validation %+v, want runs 0 and 2 named as disagreeing", cv)
	}
	if x := cal.Compute.Factor; math.Abs(x-1) > 0.03 {
		t.Errorf("compute x%.3f: the disagreeing runs' correction was applied (%s)", x, cal.Summary())
	}
	if s := cal.Summary(); !strings.Contains(s, "2 runs disagree beyond the noise") {
		t.Errorf("summary %q does not say the runs disagree", s)
	}
}
