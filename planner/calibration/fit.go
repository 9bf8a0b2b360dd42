// Package calibration fits a cluster's calibration factors (compute, each
// link class) to the iteration times of real runs: the statistics behind
// `pipette-launch calibrate`. The factors, the runs and how a prediction is
// split by factor (Linearize) are the cluster package's; this package only
// decides the factors from the runs.
package calibration

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// Fit constants. Each run's residual is relative (a 10 s and a 0.1 s job
// weigh the same) and factors are fitted in log space, so none can turn
// negative or be pushed against a clip bound to make up for another.
const (
	// calibrationPrior pulls each log factor towards 0 (factor 1), in units
	// of a run's squared relative residual: a factor is a priori within
	// about +-50% of the model (runRelNoise/0.5 squared), so the prior only
	// decides how the runs' correction is shared among factors they all
	// move alike.
	calibrationPrior = 0.01
	// runRelNoise is the relative scatter assumed for one run's time about
	// the model's corrected prediction when the runs themselves cannot say
	// (fewer runs than factors + 1): run-to-run noise plus what the model
	// misses between configurations (TestLeaveOneTableOut: 5-8% mean error
	// per row within the published tables, with the table's offset removed).
	runRelNoise = 0.08
	// timingRelNoise is the scatter of one configuration measured twice
	// (0.5-2%, docs/cost-model.md): the least residual scatter assumed.
	timingRelNoise = 0.02
	// biweightScale: runs are weighted by Tukey's biweight of their
	// residual over this many robust standard deviations (1.4826 x median
	// absolute residual, at least runRelNoise): a run that far from the fit
	// the others agree on gets no weight, so one outlier cannot move the
	// factors (4.685 keeps 95% efficiency when residuals are normal).
	biweightScale      = 4.685
	minFactor          = 0.05
	maxFactor          = 20
	observedShareFloor = 0.05
)

// Fit fits the factors to runs. With P_ik = part_k/x_k,run (the
// raw seconds factor k scales in run i) and F_i the rest it minimises
//
//	sum_i w_i ((F_i + sum_k P_ik x_k - observed_i)/observed_i)^2
//	+ prior x sum_k (ln x_k)^2
//
// over the factors x_k = exp(u_k) by Gauss-Newton, with biweight weights w_i
// (three runs or more) so an outlier run is down-weighted. Factors no run
// is sensitive to are left out; a factor whose part is under 5% of every
// run's predicted time is not constrained by the runs: it keeps the value it
// had when its newest run was recorded (1 if none) and is not fitted.
// Observations count the runs in which the factor's part is at least 5%.
//
// Last, the fitted correction is shrunk towards no correction (positive-
// part James-Stein, doubled to keep clear of noise): by 1 - 2 p s^2 / gain,
// where gain is how much the fit
// lowered the runs' squared error, p the number of fitted factors and s^2
// the runs' residual variance after the fit (from the runs when they leave
// a degree of freedom, else with runRelNoise as one more observation). A correction the runs' own scatter could produce is not
// applied; a large consistent one is applied almost in full.
func Fit(runs []cluster.CalibrationRun, now time.Time) *cluster.Calibration {
	var keys []string
	seen := map[string]bool{}
	for _, r := range runs {
		for k := range r.PartsS {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == cluster.ComputeFactorKey) != (keys[j] == cluster.ComputeFactorKey) {
			return keys[i] == cluster.ComputeFactorKey
		}
		return keys[i] < keys[j]
	})
	obs := make([]int, len(keys))
	held := make([]float64, len(keys)) // value of each unconstrained factor
	for i, k := range keys {
		held[i] = 1
		for _, r := range runs {
			if _, ok := r.PartsS[k]; ok {
				held[i] = r.FactorAtRun(k)
			}
			if r.PredictedS > 0 && r.PartsS[k]/r.PredictedS >= observedShareFloor {
				obs[i]++
			}
		}
	}
	var free []int // indices into keys of the fitted factors
	for i := range keys {
		if obs[i] > 0 {
			free = append(free, i)
		}
	}
	p := newCalibrationProblem(runs, keys, free, held)
	u := p.fit()
	cal := &cluster.Calibration{UpdatedAt: now, Compute: cluster.CalibrationFactor{Factor: 1}, Runs: runs}
	x := slices.Clone(held)
	for j, i := range free {
		x[i] = math.Exp(u[j])
	}
	for i, k := range keys {
		f := cluster.CalibrationFactor{Factor: math.Min(maxFactor, math.Max(minFactor, x[i])), Observations: obs[i]}
		if k == cluster.ComputeFactorKey {
			cal.Compute = f
			continue
		}
		cal.Links = append(cal.Links, cluster.LinkCalibration{Link: k, CalibrationFactor: f})
	}
	return cal
}

// calibrationProblem is FitCalibration's least-squares problem in the log
// factors of the free keys: run i's relative residual is
// (fixed_i + sum_j raw_ij exp(u_j))/observed_i - 1.
type calibrationProblem struct {
	fixed []float64   // F_i plus the held factors' parts, over observed
	raw   [][]float64 // P_ij over observed, j over free factors
	w     []float64   // robust weights
}

func newCalibrationProblem(runs []cluster.CalibrationRun, keys []string, free []int, held []float64) *calibrationProblem {
	p := &calibrationProblem{}
	isFree := map[int]bool{}
	for _, i := range free {
		isFree[i] = true
	}
	for _, r := range runs {
		fixed := r.FixedS
		for i, k := range keys {
			if !isFree[i] {
				fixed += r.PartsS[k] / r.FactorAtRun(k) * held[i]
			}
		}
		row := make([]float64, len(free))
		for j, i := range free {
			row[j] = r.PartsS[keys[i]] / r.FactorAtRun(keys[i]) / r.ObservedS
		}
		p.fixed = append(p.fixed, fixed/r.ObservedS)
		p.raw = append(p.raw, row)
		p.w = append(p.w, 1)
	}
	return p
}

func (p *calibrationProblem) residuals(u []float64) []float64 {
	out := make([]float64, len(p.fixed))
	for i := range out {
		v := p.fixed[i]
		for j, a := range p.raw[i] {
			v += a * math.Exp(u[j])
		}
		out[i] = v - 1
	}
	return out
}

func (p *calibrationProblem) loss(u []float64) float64 {
	l := 0.0
	for i, r := range p.residuals(u) {
		l += p.w[i] * r * r
	}
	for _, x := range u {
		l += calibrationPrior * x * x
	}
	return l
}

// gaussNewton minimises loss from u (damped: a step that does not lower
// the loss is halved).
func (p *calibrationProblem) gaussNewton(u []float64) []float64 {
	n := len(u)
	lo, hi := math.Log(minFactor), math.Log(maxFactor)
	for range 50 {
		res := p.residuals(u)
		a := make([][]float64, n)
		b := make([]float64, n)
		for j := range a {
			a[j] = make([]float64, n)
			a[j][j] = calibrationPrior
			b[j] = -calibrationPrior * u[j]
		}
		for i, r := range res {
			for j := range n {
				jj := p.raw[i][j] * math.Exp(u[j])
				b[j] -= p.w[i] * jj * r
				for k := range n {
					a[j][k] += p.w[i] * jj * p.raw[i][k] * math.Exp(u[k])
				}
			}
		}
		step := solve(a, b)
		cur := p.loss(u)
		moved := false
		for t := 1.0; t > 1e-4; t /= 2 {
			next := make([]float64, n)
			for j := range next {
				next[j] = math.Min(hi, math.Max(lo, u[j]+t*step[j]))
			}
			if p.loss(next) < cur {
				u, moved = next, true
				break
			}
		}
		if !moved {
			break
		}
	}
	return u
}

// fit is Gauss-Newton with robust weights (three runs or more), then the
// James-Stein shrinkage described at Fit. The weights are
// Tukey's biweight of each run's residual against a clean fit: the fit to
// all runs but the one whose removal fits the others best (the likeliest
// outlier), so a run that alone constrains a factor cannot hide its error
// by moving that factor.
func (p *calibrationProblem) fit() []float64 {
	nf := len(p.fixed)
	u := make([]float64, len(p.raw[0]))
	if len(u) == 0 {
		return u
	}
	if nf >= 3 {
		drop, best := -1, math.Inf(1)
		var clean []float64
		for i := range nf {
			p.w[i] = 0
			if v := p.gaussNewton(make([]float64, len(u))); p.loss(v) < best {
				drop, best, clean = i, p.loss(v), v
			}
			p.w[i] = 1
		}
		res := p.residuals(clean)
		var others []float64
		for i, r := range res {
			if i != drop {
				others = append(others, math.Abs(r))
			}
		}
		scale := math.Max(1.4826*stats.Median(others), runRelNoise)
		for i, r := range res {
			p.w[i] = math.Pow(math.Max(0, 1-math.Pow(r/(biweightScale*scale), 2)), 2)
		}
	}
	u = p.gaussNewton(u)
	zero := make([]float64, len(u))
	before, after := p.residuals(zero), p.residuals(u)
	var s0, s1, nEff float64
	for i := range before {
		s0 += p.w[i] * before[i] * before[i]
		s1 += p.w[i] * after[i] * after[i]
		nEff += p.w[i]
	}
	// Effective parameters: no more than the runs (factors that the runs
	// move alike count once).
	k := math.Min(float64(len(u)), nEff)
	// The residual variance: the runs' own once they leave a degree of
	// freedom (at least that of 2% timing noise), else runRelNoise counted
	// as one more observation.
	s2 := (s1 + runRelNoise*runRelNoise) / math.Max(1, nEff-k+1)
	if dof := nEff - k; dof >= 1 {
		s2 = math.Max(s1/dof, timingRelNoise*timingRelNoise)
	}
	c := 0.0
	if gain := s0 - s1; gain > 0 {
		c = math.Max(0, 1-2*k*s2/gain)
	}
	for j := range u {
		u[j] *= c
	}
	return u
}

// solve is Gaussian elimination with partial pivoting; a is symmetric
// positive definite here (the prior makes it so).
func solve(a [][]float64, b []float64) []float64 {
	n := len(b)
	for c := 0; c < n; c++ {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		b[c], b[p] = b[p], b[c]
		for r := c + 1; r < n; r++ {
			m := a[r][c] / a[c][c]
			for k := c; k < n; k++ {
				a[r][k] -= m * a[c][k]
			}
			b[r] -= m * b[c]
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := b[r]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}
