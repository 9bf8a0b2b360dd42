// Package calib is the calibration a cluster file records: the factors
// fitted from real runs' iteration times (compute and each link class),
// the runs they were fitted to with each prediction split by factor
// (Linearize), the cross-validation that says how much of the fit to keep,
// and the strict checks of that section. planner/cluster applies the
// factors when it resolves a cluster; planner/calibration fits them.
package calib

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// Calibration is a per-cluster correction fitted from the iteration times
// of real runs (`pipette-launch calibrate`). Factors multiply TIME: 1.2
// means that part of the step ran 20% slower than the model said.
type Calibration struct {
	UpdatedAt time.Time `yaml:"updated_at" json:"updated_at"`
	Compute   Fitted    `yaml:"compute" json:"compute"`
	// Links are per link class: "intra_host ISLAND" (the bus inside one
	// island's hosts), "inter_host ISLAND" (between hosts of one island),
	// "inter_host A,B" (between islands A and B, names sorted).
	Links []Link `yaml:"links,omitempty" json:"links,omitempty"`
	// Runs are every observation the factors were fitted to, newest last.
	Runs []Run `yaml:"runs" json:"runs"`
	// CrossValidation says how much of the correction the runs support
	// when each is predicted from the others (3 runs or more; nil before).
	CrossValidation *CrossValidation `yaml:"cross_validation,omitempty" json:"cross_validation,omitempty"`
}

// CrossValidation is the outcome of predicting runs the fit did not see:
// the factors are the fitted ones scaled, in log space, by Kept (1: the
// whole correction, 0: none) over Folds folds of the runs.
// Disagreeing are the runs (indices into Runs) that disagree with the
// others beyond their noise: the fit down-weighted one of them as an
// outlier, and these are the runs still off by more than three times a
// run's scatter once the kept correction is applied.
type CrossValidation struct {
	Folds       int     `yaml:"folds" json:"folds"`
	Kept        float64 `yaml:"kept" json:"kept"`
	Disagreeing []int   `yaml:"disagreeing,omitempty" json:"disagreeing,omitempty"`
}

// Fitted is one fitted factor and how many runs constrain it
// (a run counts when that part is at least 5% of its predicted time).
type Fitted struct {
	Factor       float64 `yaml:"factor" json:"factor"`
	Observations int     `yaml:"observations" json:"observations"`
}

// Link is the factor of one link class.
type Link struct {
	Link   string `yaml:"link" json:"link"`
	Fitted `yaml:",inline"`
}

// Run is one observed run and the model's linearisation of its
// prediction: with factors x, predicted(x) = fixed_s + sum over k of
// parts_s[k] x x[k] / factors[k], where parts_s[k] is the part of the
// prediction that factor k scales and factors[k] its value when the run
// was recorded (exact for small changes: every time in the model scales
// with its factor, and the critical path is a max of sums).
type Run struct {
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

// FactorAtRun is factor k when the run was recorded (1 when absent).
func (r Run) FactorAtRun(k string) float64 {
	if x := r.Factors[k]; x > 0 {
		return x
	}
	return 1
}

// ComputeFactorKey names the compute factor in Run.SensitivityS.
const ComputeFactorKey = "compute"

// Error is the relative error of the run's prediction (signed: + is too slow).
func (r Run) Error() float64 { return (r.PredictedS - r.ObservedS) / r.ObservedS }

// Summary is "calibrated from N runs, last error X% (factors)", and
// how much of the fitted correction cross-validation kept when it kept
// less than all (why the factors sit nearer 1 than the runs suggest).
func (c *Calibration) Summary() string {
	if c == nil || len(c.Runs) == 0 {
		return ""
	}
	last := c.Runs[len(c.Runs)-1]
	s := fmt.Sprintf("calibrated from %d runs, last error %.1f%% (compute x%.3f", len(c.Runs), 100*math.Abs(last.Error()), c.Compute.Factor)
	for _, l := range c.Links {
		s += fmt.Sprintf(", %s x%.3f", l.Link, l.Factor)
	}
	if cv := c.CrossValidation; cv != nil && cv.Kept < 1 {
		s += fmt.Sprintf("; %.0f%% of the fitted correction kept: the runs disagree", 100*cv.Kept)
	}
	if cv := c.CrossValidation; cv != nil && len(cv.Disagreeing) > 0 {
		s += fmt.Sprintf("; %d %s beyond the noise", len(cv.Disagreeing), text.Plural(len(cv.Disagreeing), "run disagrees", "runs disagree"))
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

func (c *Calibration) Factor(key string) float64 {
	if f, ok := c.Factors()[key]; ok && f > 0 {
		return f
	}
	return 1
}

// secondsPart bounds the parts of a recorded prediction (parts_s,
// fixed_s): any share of an iteration, down to none.
var secondsPart = limits.Range{Max: limits.IterationSeconds.Max, Unit: "s"}

// keptShare bounds cross_validation.kept: the share of the correction kept.
var keptShare = limits.Range{Max: 1}

func Validate(errs *yamlcheck.Problems, c *Calibration, islands map[string]int) {
	factor := func(p string, f Fitted) {
		errs.Check(p+".factor", limits.CalibrationFactor, f.Factor)
		if f.Observations < 0 {
			errs.Add(p+".observations", "must be >= 0, got %d", f.Observations)
		}
	}
	factor("calibration.compute", c.Compute)
	for i, l := range c.Links {
		p := fmt.Sprintf("calibration.links[%d]", i)
		factor(p, l.Fitted)
		if err := checkLinkKey(l.Link, islands); err != nil {
			errs.Add(p+".link", "%v", err)
		}
	}
	for i, r := range c.Runs {
		p := fmt.Sprintf("calibration.runs[%d]", i)
		errs.Check(p+".observed_iteration_s", limits.IterationSeconds, r.ObservedS)
		errs.CheckOptional(p+".predicted_iteration_s", limits.IterationSeconds, r.PredictedS)
		errs.Check(p+".fixed_s", secondsPart, r.FixedS)
		if r.Iterations < 0 {
			errs.Add(p+".iterations", "must be >= 0, got %d", r.Iterations)
		}
		for _, k := range slices.Sorted(maps.Keys(r.PartsS)) {
			errs.Check(p+".parts_s."+k, secondsPart, r.PartsS[k])
		}
		for _, k := range slices.Sorted(maps.Keys(r.Factors)) {
			errs.Check(p+".factors."+k, limits.CalibrationFactor, r.Factors[k])
		}
	}
	if cv := c.CrossValidation; cv != nil {
		errs.Check("calibration.cross_validation.kept", keptShare, cv.Kept)
		if cv.Folds < 0 {
			errs.Add("calibration.cross_validation.folds", "must be >= 0, got %d", cv.Folds)
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

// sensitivityStep is the relative change of a factor used to differentiate
// the prediction.
const sensitivityStep = 0.01

// Linearize splits a prediction by factor: eval prices the run under the
// factors it is given, keys are the factors to split by. It returns the
// run with PredictedS (cal's own factors), PartsS (dT/dx_k x x_k: the
// seconds factor k scales; zero parts left out), Factors (x_k in force) and
// FixedS (what no factor scales), each factor's part measured by changing
// it by 1%.
func Linearize(cal *Calibration, keys []string, eval func(*Calibration) (float64, error)) (Run, error) {
	base, err := eval(cal)
	if err != nil {
		return Run{}, err
	}
	cur := cal.Factors()
	run := Run{PredictedS: base, PartsS: map[string]float64{}, Factors: map[string]float64{}, FixedS: base}
	for _, k := range keys {
		x := cur[k]
		if x <= 0 {
			x = 1
		}
		t1, err := eval(withFactor(cal, k, x*(1+sensitivityStep)))
		if err != nil {
			return Run{}, fmt.Errorf("sensitivity to %s: %w", k, err)
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
	out := &Calibration{Compute: Fitted{Factor: 1}}
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
	out.Links = append(out.Links, Link{Link: key, Fitted: Fitted{Factor: x}})
	return out
}
