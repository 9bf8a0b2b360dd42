package cluster

import (
	"fmt"
	"github.com/pipette-launch/pipette-launch/internal/stats"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// Calibration is a per-cluster correction fitted from the iteration times
// of real runs (`pipette-launch calibrate`). Factors multiply TIME: 1.2
// means that part of the step ran 20% slower than the model said.
type Calibration struct {
	UpdatedAt time.Time         `yaml:"updated_at" json:"updated_at"`
	Compute   CalibrationFactor `yaml:"compute" json:"compute"`
	// Links are per link class: "intra_host ISLAND" (the bus inside one
	// island's hosts), "inter_host ISLAND" (between hosts of one island),
	// "inter_host A,B" (between islands A and B, names sorted).
	Links []LinkCalibration `yaml:"links,omitempty" json:"links,omitempty"`
	// Runs are every observation the factors were fitted to, newest last.
	Runs []CalibrationRun `yaml:"runs" json:"runs"`
}

// CalibrationFactor is one fitted factor and how many runs constrain it
// (a run counts when that part is at least 5% of its predicted time).
type CalibrationFactor struct {
	Factor       float64 `yaml:"factor" json:"factor"`
	Observations int     `yaml:"observations" json:"observations"`
}

// LinkCalibration is the factor of one link class.
type LinkCalibration struct {
	Link              string `yaml:"link" json:"link"`
	CalibrationFactor `yaml:",inline"`
}

// CalibrationRun is one observed run and the model's linearisation of its
// prediction: with factors x, predicted(x) = fixed_s + sum over k of
// parts_s[k] x x[k] / factors[k], where parts_s[k] is the part of the
// prediction that factor k scales and factors[k] its value when the run
// was recorded (exact for small changes: every time in the model scales
// with its factor, and the critical path is a max of sums).
type CalibrationRun struct {
	Source string    `yaml:"source" json:"source"`
	At     time.Time `yaml:"at" json:"at"`
	// Plan says what ran ("megatron TP2 PP2 DP1 mb1 gbs8 ...").
	Plan string `yaml:"plan" json:"plan"`
	// Iterations is how many iteration times the observation averages.
	Iterations int     `yaml:"iterations" json:"iterations"`
	ObservedS  float64 `yaml:"observed_iteration_s" json:"observed_iteration_s"`
	// PredictedS is the prediction with the calibration in force before
	// this run was added (its error is what `plan` reports).
	PredictedS float64            `yaml:"predicted_iteration_s" json:"predicted_iteration_s"`
	FixedS     float64            `yaml:"fixed_s,omitempty" json:"fixed_s,omitempty"`
	PartsS     map[string]float64 `yaml:"parts_s" json:"parts_s"`
	Factors    map[string]float64 `yaml:"factors,omitempty" json:"factors,omitempty"`
}

// factorAtRun is factor k when the run was recorded (1 when absent).
func (r CalibrationRun) factorAtRun(k string) float64 {
	if x := r.Factors[k]; x > 0 {
		return x
	}
	return 1
}

// ComputeFactorKey names the compute factor in CalibrationRun.SensitivityS.
const ComputeFactorKey = "compute"

// Error is the relative error of the run's prediction (signed: + is too slow).
func (r CalibrationRun) Error() float64 { return (r.PredictedS - r.ObservedS) / r.ObservedS }

// Summary is "calibrated from N runs, last error X%".
func (c *Calibration) Summary() string {
	if c == nil || len(c.Runs) == 0 {
		return ""
	}
	last := c.Runs[len(c.Runs)-1]
	s := fmt.Sprintf("calibrated from %d runs, last error %.1f%% (compute x%.3f", len(c.Runs), 100*math.Abs(last.Error()), c.Compute.Factor)
	for _, l := range c.Links {
		s += fmt.Sprintf(", %s x%.3f", l.Link, l.Factor)
	}
	return s + ")"
}

// Factors returns every factor by key (compute and links).
func (c *Calibration) Factors() map[string]float64 {
	out := map[string]float64{}
	if c == nil {
		return out
	}
	if c.Compute.Factor > 0 {
		out[ComputeFactorKey] = c.Compute.Factor
	}
	for _, l := range c.Links {
		out[l.Link] = l.Factor
	}
	return out
}

func (c *Calibration) factor(key string) float64 {
	if f, ok := c.Factors()[key]; ok && f > 0 {
		return f
	}
	return 1
}

func validateCalibration(errs *yamlcheck.Problems, c *Calibration, islands map[string]int) {
	positive := func(p string, f CalibrationFactor) {
		if !(f.Factor > 0) || math.IsInf(f.Factor, 0) {
			errs.Add(p+".factor", "must be > 0, got %g", f.Factor)
		}
		if f.Observations < 0 {
			errs.Add(p+".observations", "must be >= 0, got %d", f.Observations)
		}
	}
	positive("calibration.compute", c.Compute)
	for i, l := range c.Links {
		p := fmt.Sprintf("calibration.links[%d]", i)
		positive(p, l.CalibrationFactor)
		if err := checkLinkKey(l.Link, islands); err != nil {
			errs.Add(p+".link", "%v", err)
		}
	}
	for i, r := range c.Runs {
		p := fmt.Sprintf("calibration.runs[%d]", i)
		if !(r.ObservedS > 0) {
			errs.Add(p+".observed_iteration_s", "must be > 0, got %g", r.ObservedS)
		}
		for k, v := range r.PartsS {
			if v < 0 || math.IsNaN(v) {
				errs.Add(p+".parts_s."+k, "must be >= 0, got %g", v)
			}
		}
		for k, v := range r.Factors {
			if !(v > 0) {
				errs.Add(p+".factors."+k, "must be > 0, got %g", v)
			}
		}
	}
}

func checkLinkKey(key string, islands map[string]int) error {
	kind, rest, _ := strings.Cut(key, " ")
	names := strings.Split(rest, ",")
	switch {
	case kind == "intra_host" && len(names) == 1, kind == "inter_host" && (len(names) == 1 || len(names) == 2):
	default:
		return fmt.Errorf("%q: want \"intra_host ISLAND\", \"inter_host ISLAND\" or \"inter_host A,B\"", key)
	}
	for _, n := range names {
		if _, ok := islands[n]; !ok {
			return fmt.Errorf("%q: unknown cluster %q", key, n)
		}
	}
	return nil
}

// IntraHostKey and InterHostKey name link classes.
func IntraHostKey(island string) string { return "intra_host " + island }

// InterHostKey is the class of links between hosts of islands a and b.
func InterHostKey(a, b string) string {
	if a == b {
		return "inter_host " + a
	}
	if a > b {
		a, b = b, a
	}
	return "inter_host " + a + "," + b
}

// FactorKeys lists the factors a cluster can be calibrated with: compute,
// the intra-host bus of islands with more than one GPU per host, links
// inside islands of several hosts and between every two islands.
func (f *File) FactorKeys() []string {
	keys := []string{ComputeFactorKey}
	for _, c := range f.Clusters {
		if c.GPUsPerHost > 1 {
			keys = append(keys, IntraHostKey(c.Name))
		}
	}
	for i, a := range f.Clusters {
		if len(a.Hosts) > 1 {
			keys = append(keys, InterHostKey(a.Name, a.Name))
		}
		for _, b := range f.Clusters[i+1:] {
			keys = append(keys, InterHostKey(a.Name, b.Name))
		}
	}
	return keys
}

// applyCalibration scales compute and links by the fitted factors.
func (f *File) applyCalibration(islands []Island, hosts []Host, links *compactLinks) {
	c := f.Calibration
	if c == nil {
		return
	}
	for i := range hosts {
		c.ScaleHost(&hosts[i], islands[hosts[i].Island].Spec.Name)
	}
	// Links between hosts of two islands (or within one) share a factor:
	// scale each island pair's nominal link and measured rates.
	ni := links.islands
	links.measuredDiv = make([]float64, ni*ni)
	for a := range islands {
		for b := range islands {
			k := c.factor(InterHostKey(islands[a].Spec.Name, islands[b].Spec.Name))
			links.nominal[a*ni+b].BytesPerS /= k
			links.nominal[a*ni+b].LatencyS *= k
			links.measuredDiv[a*ni+b] = k
		}
	}
}

// ScaleHost applies the compute and intra-host factors to one host of the
// named island: its GPU's tensor-core rates and HBM bandwidth are divided by
// the compute factor, its bus by the island's intra-host factor.
func (c *Calibration) ScaleHost(h *Host, island string) {
	cf := c.factor(ComputeFactorKey)
	scaleCompute(&h.GPU, 1/cf)
	h.GPU.MemoryBandwidthTBPerS = gpu.HBMBytesPerS(h.GPU) / 1e12 / cf
	h.IntraBytesPerS /= c.factor(IntraHostKey(island))
}

// sensitivityStep is the relative change of a factor used to differentiate
// the prediction.
const sensitivityStep = 0.01

// Linearize splits a prediction by the factors of f's calibration:
// predict prices the run on a cluster resolved from a copy of f with one
// factor changed by 1%. It returns the run with PredictedS (f's own
// factors), PartsS (dT/dx_k x x_k: the seconds factor k scales; zero parts
// left out), Factors (x_k in force) and FixedS (what no factor scales).
func Linearize(f *File, t fabric.Transport, predict func(*Cluster) (float64, error)) (CalibrationRun, error) {
	eval := func(cal *Calibration) (float64, error) {
		g := *f
		g.Calibration = cal
		c, err := g.ResolveFor(t)
		if err != nil {
			return 0, err
		}
		return predict(c)
	}
	return LinearizeFunc(f.Calibration, f.FactorKeys(), eval)
}

// LinearizeFunc is Linearize for any way of pricing a run under a calibration:
// eval prices it with the given factors, keys are the factors to split by.
func LinearizeFunc(cal *Calibration, keys []string, eval func(*Calibration) (float64, error)) (CalibrationRun, error) {
	base, err := eval(cal)
	if err != nil {
		return CalibrationRun{}, err
	}
	cur := cal.Factors()
	run := CalibrationRun{PredictedS: base, PartsS: map[string]float64{}, Factors: map[string]float64{}, FixedS: base}
	for _, k := range keys {
		x := cur[k]
		if x <= 0 {
			x = 1
		}
		t1, err := eval(withFactor(cal, k, x*(1+sensitivityStep)))
		if err != nil {
			return CalibrationRun{}, fmt.Errorf("sensitivity to %s: %w", k, err)
		}
		if part := (t1 - base) / sensitivityStep; part > 1e-12*base {
			run.PartsS[k] = part
			run.Factors[k] = x
			run.FixedS -= part
		}
	}
	run.FixedS = math.Max(0, run.FixedS)
	return run, nil
}

// withFactor is a copy of c (or an identity calibration) with key set to x.
func withFactor(c *Calibration, key string, x float64) *Calibration {
	out := &Calibration{Compute: CalibrationFactor{Factor: 1}}
	if c != nil {
		out.Compute = c.Compute
		out.Links = slices.Clone(c.Links)
	}
	if key == ComputeFactorKey {
		out.Compute.Factor = x
		return out
	}
	for i := range out.Links {
		if out.Links[i].Link == key {
			out.Links[i].Factor = x
			return out
		}
	}
	out.Links = append(out.Links, LinkCalibration{Link: key, CalibrationFactor: CalibrationFactor{Factor: x}})
	return out
}

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

// FitCalibration fits the factors to runs. With P_ik = part_k/x_k,run (the
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
func FitCalibration(runs []CalibrationRun, now time.Time) *Calibration {
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
		if (keys[i] == ComputeFactorKey) != (keys[j] == ComputeFactorKey) {
			return keys[i] == ComputeFactorKey
		}
		return keys[i] < keys[j]
	})
	obs := make([]int, len(keys))
	held := make([]float64, len(keys)) // value of each unconstrained factor
	for i, k := range keys {
		held[i] = 1
		for _, r := range runs {
			if _, ok := r.PartsS[k]; ok {
				held[i] = r.factorAtRun(k)
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
	cal := &Calibration{UpdatedAt: now, Compute: CalibrationFactor{Factor: 1}, Runs: runs}
	x := slices.Clone(held)
	for j, i := range free {
		x[i] = math.Exp(u[j])
	}
	for i, k := range keys {
		f := CalibrationFactor{Factor: math.Min(maxFactor, math.Max(minFactor, x[i])), Observations: obs[i]}
		if k == ComputeFactorKey {
			cal.Compute = f
			continue
		}
		cal.Links = append(cal.Links, LinkCalibration{Link: k, CalibrationFactor: f})
	}
	return cal
}

var debugCalibration = false

// calibrationProblem is FitCalibration's least-squares problem in the log
// factors of the free keys: run i's relative residual is
// (fixed_i + sum_j raw_ij exp(u_j))/observed_i - 1.
type calibrationProblem struct {
	fixed []float64   // F_i plus the held factors' parts, over observed
	raw   [][]float64 // P_ij over observed, j over free factors
	w     []float64   // robust weights
}

func newCalibrationProblem(runs []CalibrationRun, keys []string, free []int, held []float64) *calibrationProblem {
	p := &calibrationProblem{}
	isFree := map[int]bool{}
	for _, i := range free {
		isFree[i] = true
	}
	for _, r := range runs {
		fixed := r.FixedS
		for i, k := range keys {
			if !isFree[i] {
				fixed += r.PartsS[k] / r.factorAtRun(k) * held[i]
			}
		}
		row := make([]float64, len(free))
		for j, i := range free {
			row[j] = r.PartsS[keys[i]] / r.factorAtRun(keys[i]) / r.ObservedS
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
// James-Stein shrinkage described at FitCalibration. The weights are
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
	if debugCalibration {
		fmt.Printf("fit: w=%v u=%v s0=%g s1=%g s2=%g c=%g\n", p.w, u, s0, s1, s2, c)
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
