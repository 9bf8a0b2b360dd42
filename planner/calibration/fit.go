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

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
)

// Fit constants. Each run's residual is relative (a 10 s and a 0.1 s job
// weigh the same) and factors are fitted in log space, so none can turn
// negative or be pushed against a clip bound to make up for another.
//
// The prior on the log factors is a mixture of normals (priorComponents):
// a cluster is either near the model (the common case) or far from it
// (a power-capped GPU, a misdeclared link). The runs decide between them by
// their likelihood, so a correction the runs' own scatter could produce is
// mostly shrunk away and a large consistent one is applied almost in full.
const (
	// nearPriorSD: the spread of a whole cluster's offset from the model
	// when it was not fitted: TestLeaveOneTableOut's leave-one-out mean log
	// error per table is -7.4% to +4.3%; less each table's own sampling
	// variance (scatter^2/rows) that leaves a spread of about 3%.
	nearPriorSD = 0.03
	// nearOwnSD: how far one factor strays from the others' common offset
	// when the cluster is near the model: half the offset's spread, so the
	// runs' scatter is not fitted by moving link factors apart.
	nearOwnSD = nearPriorSD / 2
	// farPriorSD and farPriorWeight: a cluster off the model by tens of
	// percent (issue 22's unfitted runs were 27% and 49% off on average)
	// is allowed one time in ten.
	farPriorSD     = 0.5
	farPriorWeight = 0.1
	// runRelNoise is the relative scatter assumed for one run's time about
	// the model's corrected prediction: run-to-run noise plus what the
	// model misses between configurations (TestLeaveOneTableOut: 5-11%
	// standard deviation of the log error inside a table once its offset
	// is removed, 8% typical). It counts as priorNoiseRuns runs' worth of
	// evidence beside the runs' own scatter about the freest fit.
	runRelNoise    = 0.08
	priorNoiseRuns = 2
	// timingRelNoise is the scatter of one configuration measured twice
	// (0.5-2%, docs/cost-model.md): the least residual scatter assumed.
	timingRelNoise = 0.02
	// biweightScale: runs are weighted by Tukey's biweight of their
	// residual over this many robust standard deviations (1.4826 x median
	// absolute residual, at least runRelNoise): a run that far from the fit
	// the others agree on gets no weight, so one outlier cannot move the
	// factors (4.685 keeps 95% efficiency when residuals are normal).
	biweightScale      = 4.685
	observedShareFloor = 0.05
	// cvLossScale: the residual beyond which a held-out run counts as
	// unexplained in crossValidate (biweightLoss): biweightScale robust
	// standard deviations of runRelNoise, as the fit's own weights.
	cvLossScale = biweightScale * runRelNoise
	// disagreeResidual: a run off by more than three times runRelNoise
	// once the kept correction is applied is named as disagreeing.
	disagreeResidual = 3 * runRelNoise
)

// Factors are clamped to the range a cluster file may hold
// (limits.CalibrationFactor), so that what calibrate writes loads again.
var minFactor, maxFactor = limits.CalibrationFactor.Min, limits.CalibrationFactor.Max

// Fit fits the factors to runs. With P_ik = part_k/x_k,run (the raw
// seconds factor k scales in run i) and F_i the rest, run i's relative
// residual is r_i = (F_i + sum_k P_ik x_k - observed_i)/observed_i, and
// under each prior component c (priorComponents: log factors u ~ N(0, V_c))
// it minimises
//
//	sum_i w_i r_i^2 + s^2 u^T V_c^-1 u
//
// over the factors x_k = exp(u_k) by Gauss-Newton: the posterior mode when
// a run's residual has standard deviation s. The modes are averaged with
// the components' posterior weights (their prior weight times the
// likelihood of the runs' residuals under them, in the linear
// approximation at x = 1).
//
// w_i are biweight weights (three runs or more) so an outlier run is
// down-weighted; s^2 pools runRelNoise^2 (as priorNoiseRuns runs) with the
// runs' own scatter about the far fit. Factors no run is sensitive to are
// left out; a factor whose part is under 5% of every run's predicted time
// is not constrained by the runs: it keeps the value it had when its
// newest run was recorded (1 if none) and is not fitted. Observations count
// the runs in which the factor's part is at least 5%.
func Fit(runs []calib.Run, now time.Time) *calib.Calibration {
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
		if (keys[i] == calib.ComputeFactorKey) != (keys[j] == calib.ComputeFactorKey) {
			return keys[i] == calib.ComputeFactorKey
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
	u, cv := p.crossValidate(u)
	cal := &calib.Calibration{UpdatedAt: now, Compute: calib.Fitted{Factor: 1}, Runs: runs, CrossValidation: cv}
	x := slices.Clone(held)
	for j, i := range free {
		x[i] = math.Exp(u[j])
	}
	for i, k := range keys {
		f := calib.Fitted{Factor: math.Min(maxFactor, math.Max(minFactor, x[i])), Observations: obs[i]}
		if k == calib.ComputeFactorKey {
			cal.Compute = f
			continue
		}
		cal.Links = append(cal.Links, calib.Link{Link: k, Fitted: f})
	}
	return cal
}

// keptShares are the shares of the fitted log factors crossValidate
// chooses between: whole, none, and three steps between.
var keptShares = []float64{0, 0.25, 0.5, 0.75, 1}

// maxFolds bounds the cross-validation's refits: leave-one-out up to 10
// runs, 10 folds beyond.
const maxFolds = 10

// crossValidate keeps the share of the fitted log factors u that best
// predicts runs the fit did not see: each fold of runs is predicted from
// the factors fitted to the others, scaled by each of keptShares, and the
// share with the least weighted squared error (the full fit's robust
// weights, so an outlier cannot decide; a bounded loss instead when the
// runs disagree, see below) scales u. The prior alone cannot
// see this: three runs whose errors differ in sign by configuration pass
// as a cluster off the model, and the correction they agree on makes the
// next configuration worse (issue 22: 29% -> 37%). Fewer than 3 runs leave
// a fold too small to fit, and u is kept whole (the prior shrinks it).
func (p *calibrationProblem) crossValidate(u []float64) ([]float64, *calib.CrossValidation) {
	n := len(p.fixed)
	if n < 3 || len(u) == 0 {
		return u, nil
	}
	folds := min(n, maxFolds)
	// When the robust weights took a run for an outlier, the runs disagree
	// beyond their noise, and with few runs the call may be wrong (two
	// runs mispriced alike outvote the one the model prices right):
	// scoring the folds with those weights would let the call confirm
	// itself. Every held-out run then counts alike, under a bounded loss,
	// so a run no share brings near its observation decides nothing and
	// the runs the model already prices decide how much to keep.
	disagree := p.disagree()
	sse := make([]float64, len(keptShares))
	for f := range folds {
		sub := p.withoutFold(f, folds)
		uf := sub.fit()
		for k, share := range keptShares {
			us := scaled(uf, share)
			for i := f; i < n; i += folds {
				r := p.residual(i, us)
				if disagree {
					sse[k] += biweightLoss(r, cvLossScale)
				} else {
					sse[k] += p.w[i] * r * r
				}
			}
		}
	}
	best := len(keptShares) - 1
	for k := best - 1; k >= 0; k-- {
		if sse[k] < sse[best]*(1-1e-9) {
			best = k
		}
	}
	kept := scaled(u, keptShares[best])
	cv := &calib.CrossValidation{Folds: folds, Kept: keptShares[best]}
	if disagree {
		for i := range n {
			if math.Abs(p.residual(i, kept)) > disagreeResidual {
				cv.Disagreeing = append(cv.Disagreeing, i)
			}
		}
	}
	return kept, cv
}

// disagree reports whether the robust weights took a run for an outlier
// (weight under a tenth: a residual over 0.83 of the biweight scale,
// four times runRelNoise at least): the runs then disagree beyond their
// noise.
func (p *calibrationProblem) disagree() bool {
	return slices.ContainsFunc(p.w, func(w float64) bool { return w < 0.1 })
}

// biweightLoss is Tukey's biweight loss of residual r at scale c: r^2/2
// near zero, flat at c^2/6 beyond c, so a held-out run no share of the
// correction brings near weighs the same whatever the share.
func biweightLoss(r, c float64) float64 {
	if math.Abs(r) >= c {
		return c * c / 6
	}
	q := 1 - (r/c)*(r/c)
	return c * c / 6 * (1 - q*q*q)
}

// scaled is the log factors u times share.
func scaled(u []float64, share float64) []float64 {
	out := make([]float64, len(u))
	for j := range u {
		out[j] = share * u[j]
	}
	return out
}

// withoutFold is p less the runs of fold f (run i is in fold i mod folds),
// with fresh weights.
func (p *calibrationProblem) withoutFold(f, folds int) *calibrationProblem {
	q := &calibrationProblem{}
	for i := range p.fixed {
		if i%folds == f {
			continue
		}
		q.fixed = append(q.fixed, p.fixed[i])
		q.raw = append(q.raw, p.raw[i])
		q.w = append(q.w, 1)
	}
	return q
}

// calibrationProblem is Fit's least-squares problem in the log factors of
// the free keys: run i's relative residual is
// (fixed_i + sum_j raw_ij exp(u_j))/observed_i - 1.
type calibrationProblem struct {
	fixed []float64   // F_i plus the held factors' parts, over observed
	raw   [][]float64 // P_ij over observed, j over free factors
	w     []float64   // robust weights
	prior [][]float64 // the loss's prior term is u^T prior u: s^2 V^-1
}

func newCalibrationProblem(runs []calib.Run, keys []string, free []int, held []float64) *calibrationProblem {
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
		out[i] = p.residual(i, u)
	}
	return out
}

// residual is run i's relative residual at the log factors u.
func (p *calibrationProblem) residual(i int, u []float64) float64 {
	v := p.fixed[i]
	for j, a := range p.raw[i] {
		v += a * math.Exp(u[j])
	}
	return v - 1
}

// sumSquares is the runs' weighted squared residual at u.
func (p *calibrationProblem) sumSquares(u []float64) float64 {
	l := 0.0
	for i, r := range p.residuals(u) {
		l += p.w[i] * r * r
	}
	return l
}

func (p *calibrationProblem) loss(u []float64) float64 {
	l := p.sumSquares(u)
	for j := range u {
		for k := range u {
			l += u[j] * p.prior[j][k] * u[k]
		}
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
			a[j][j] += 1e-12
			for k := range n {
				a[j][k] += p.prior[j][k]
				b[j] -= p.prior[j][k] * u[k]
			}
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

// fit returns the log factors: robust weights (three runs or more), the
// residual scatter, then the prior components' modes averaged by their
// posterior weights (see Fit).
func (p *calibrationProblem) fit() []float64 {
	n := len(p.raw[0])
	if n == 0 {
		return nil
	}
	p.setPrior(runRelNoise*runRelNoise, priorComponent{common: 0, own: uniform(n, farPriorSD)})
	if len(p.fixed) >= 3 {
		p.setRobustWeights()
	}
	s2 := p.noiseVariance(p.gaussNewton(make([]float64, n)))
	comps := priorComponents(n)
	modes := make([][]float64, len(comps))
	logw := make([]float64, len(comps))
	best := math.Inf(-1)
	for c, comp := range comps {
		p.setPrior(s2, comp)
		modes[c] = p.gaussNewton(make([]float64, n))
		logw[c] = math.Log(comp.weight) + p.logEvidence(s2, comp.cov())
		best = math.Max(best, logw[c])
	}
	u := make([]float64, n)
	total := 0.0
	for c := range comps {
		w := math.Exp(logw[c] - best)
		total += w
		for j := range u {
			u[j] += w * modes[c][j]
		}
	}
	for j := range u {
		u[j] /= total
	}
	return u
}

// priorComponent is one normal component of the prior on the log
// factors: u_j = g + d_j, a common offset g ~ N(0, common^2) (the whole
// cluster slower or faster than the model) and each factor's own d_j ~
// N(0, own_j^2).
type priorComponent struct {
	common float64
	own    []float64
	weight float64
}

// cov is the component's covariance of the log factors.
func (c priorComponent) cov() [][]float64 {
	n := len(c.own)
	v := make([][]float64, n)
	for j := range v {
		v[j] = make([]float64, n)
		for k := range v[j] {
			v[j][k] = c.common * c.common
		}
		v[j][j] += c.own[j] * c.own[j]
	}
	return v
}

// priorComponents are: the cluster near the model; the whole cluster far
// from it (a slower clock, a busy cluster); one factor far (one
// misdeclared link), for each factor; every factor far on its own. Half of
// farPriorWeight goes to the whole cluster, half is shared by the others.
// Separating them keeps a large correction from being spread over factors
// the runs cannot tell apart (three runs fitting three factors fit their
// own scatter).
func priorComponents(n int) []priorComponent {
	near := uniform(n, nearOwnSD)
	comps := []priorComponent{
		{nearPriorSD, near, 1 - farPriorWeight},
		{farPriorSD, near, farPriorWeight / 2},
	}
	rest := farPriorWeight / 2 / float64(n+1)
	if n > 1 {
		for j := range n {
			own := uniform(n, nearOwnSD)
			own[j] = farPriorSD
			comps = append(comps, priorComponent{nearPriorSD, own, rest})
		}
	} else {
		rest = farPriorWeight / 2
	}
	return append(comps, priorComponent{nearPriorSD, uniform(n, farPriorSD), rest})
}

func uniform(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// setPrior sets the loss's prior term for residual variance s2 and the
// component c: s2 times the inverse of c's covariance.
func (p *calibrationProblem) setPrior(s2 float64, c priorComponent) {
	v := c.cov()
	n := len(v)
	p.prior = make([][]float64, n)
	for j := range p.prior {
		p.prior[j] = make([]float64, n)
	}
	for k := range n {
		e := make([]float64, n)
		e[k] = 1
		vc := make([][]float64, n)
		for j := range v {
			vc[j] = slices.Clone(v[j])
		}
		col := solve(vc, e)
		for j := range n {
			p.prior[j][k] = s2 * col[j]
		}
	}
}

// setRobustWeights sets Tukey's biweight of each run's residual against a
// clean fit: the fit to all runs but the one whose removal fits the others
// best (the likeliest outlier), so a run that alone constrains a factor
// cannot hide its error by moving that factor.
func (p *calibrationProblem) setRobustWeights() {
	n := len(p.raw[0])
	drop, best := -1, math.Inf(1)
	var clean []float64
	for i := range p.fixed {
		p.w[i] = 0
		if v := p.gaussNewton(make([]float64, n)); p.loss(v) < best {
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

// noiseVariance is a run's residual variance: runRelNoise^2 counted as
// priorNoiseRuns runs, pooled with the runs' scatter about u (degrees of
// freedom: the weighted runs less the fitted factors), at least
// timingRelNoise^2.
func (p *calibrationProblem) noiseVariance(u []float64) float64 {
	nEff := 0.0
	for _, w := range p.w {
		nEff += w
	}
	dof := math.Max(0, nEff-float64(len(u)))
	s2 := (priorNoiseRuns*runRelNoise*runRelNoise + p.sumSquares(u)) / (priorNoiseRuns + dof)
	return math.Max(s2, timingRelNoise*timingRelNoise)
}

// logEvidence is the log likelihood of the runs' residuals at no
// correction when the log factors are N(0, V) and run i's residual noise
// is N(0, s2/w_i), in the linear approximation at u = 0 (dr_i/du_j =
// raw_ij): the residuals are N(0, S) with S = diag(s2/w_i) + J V J^T, over
// the runs with weight. Constant terms common to every component are left
// out.
func (p *calibrationProblem) logEvidence(s2 float64, v [][]float64) float64 {
	r0 := p.residuals(make([]float64, len(p.raw[0])))
	var idx []int
	for i, w := range p.w {
		if w > 1e-6 {
			idx = append(idx, i)
		}
	}
	m := len(idx)
	cov := make([][]float64, m)
	for a, i := range idx {
		cov[a] = make([]float64, m)
		for b, k := range idx {
			for j := range p.raw[i] {
				for l := range p.raw[k] {
					cov[a][b] += p.raw[i][j] * v[j][l] * p.raw[k][l]
				}
			}
		}
		cov[a][a] += s2 / p.w[i]
	}
	chol, ok := cholesky(cov)
	if !ok {
		return math.Inf(-1)
	}
	y := make([]float64, m)
	for a, i := range idx {
		y[a] = r0[i]
	}
	// Solve L z = y: r0^T S^-1 r0 = |z|^2; log det S = 2 sum log L_aa.
	quad, logDet := 0.0, 0.0
	z := make([]float64, m)
	for a := range m {
		s := y[a]
		for b := range a {
			s -= chol[a][b] * z[b]
		}
		z[a] = s / chol[a][a]
		quad += z[a] * z[a]
		logDet += 2 * math.Log(chol[a][a])
	}
	return -0.5 * (quad + logDet)
}

// cholesky is the lower-triangular L with L L^T = a, or false when a is
// not positive definite.
func cholesky(a [][]float64) ([][]float64, bool) {
	n := len(a)
	l := make([][]float64, n)
	for i := range l {
		l[i] = make([]float64, n)
		for j := 0; j <= i; j++ {
			s := a[i][j]
			for k := range j {
				s -= l[i][k] * l[j][k]
			}
			if i == j {
				if s <= 0 {
					return nil, false
				}
				l[i][i] = math.Sqrt(s)
			} else {
				l[i][j] = s / l[j][j]
			}
		}
	}
	return l, true
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
