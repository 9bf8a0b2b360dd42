package calib

import (
	"math"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// TestLinearizeSplitsByFactor: a prediction 1 + 2 x compute + 3 x link
// seconds splits into the parts each factor scales, by hand: at factors
// 1.5 and 2 the parts are 3 s and 6 s, 1 s is fixed, 10 s in all; a factor
// the prediction does not depend on gets no part.
func TestLinearizeSplitsByFactor(t *testing.T) {
	link := InterHostKey("b", "a")
	cal := &Calibration{Compute: Fitted{Factor: 1.5}, Links: []Link{{Link: link, Fitted: Fitted{Factor: 2}}}}
	eval := func(c *Calibration) (float64, error) {
		return 1 + 2*c.Factor(ComputeFactorKey) + 3*c.Factor(link), nil
	}
	run, err := Linearize(cal, []string{ComputeFactorKey, link, IntraHostKey("a")}, eval)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"predicted", run.PredictedS, 10}, {"fixed", run.FixedS, 1},
		{"compute part", run.PartsS[ComputeFactorKey], 3}, {"link part", run.PartsS[link], 6},
		{"link factor at the run", run.FactorAtRun(link), 2}, {"unused factor at the run", run.FactorAtRun(IntraHostKey("a")), 1},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %g, want %g", c.what, c.got, c.want)
		}
	}
	if _, ok := run.PartsS[IntraHostKey("a")]; ok {
		t.Errorf("a factor the prediction does not use got a part: %v", run.PartsS)
	}
	if link != "inter_host a,b" {
		t.Errorf("InterHostKey sorts the islands: %q", link)
	}
}

// TestValidateNamesTheField: each bad value is reported at its field path.
func TestValidateNamesTheField(t *testing.T) {
	for _, c := range []struct {
		name string
		cal  Calibration
		want string
	}{
		{"unknown island", Calibration{Compute: Fitted{Factor: 1}, Links: []Link{{Link: "inter_host a,z", Fitted: Fitted{Factor: 1}}}},
			`calibration.links[0].link: "inter_host a,z": unknown cluster "z"`},
		{"bad link kind", Calibration{Compute: Fitted{Factor: 1}, Links: []Link{{Link: "nvlink a", Fitted: Fitted{Factor: 1}}}},
			`calibration.links[0].link: "nvlink a": want`},
		{"zero factor", Calibration{}, "calibration.compute.factor"},
		{"kept above 1", Calibration{Compute: Fitted{Factor: 1}, CrossValidation: &CrossValidation{Kept: 1.5}}, "calibration.cross_validation.kept"},
		{"negative observations", Calibration{Compute: Fitted{Factor: 1, Observations: -1}}, "calibration.compute.observations: must be >= 0"},
	} {
		var errs yamlcheck.Problems
		Validate(&errs, &c.cal, map[string]int{"a": 0, "b": 1})
		if len(errs) == 0 || !strings.Contains(errs.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, errs, c.want)
		}
	}
	var errs yamlcheck.Problems
	Validate(&errs, &Calibration{Compute: Fitted{Factor: 1.2}, Links: []Link{{Link: IntraHostKey("a"), Fitted: Fitted{Factor: 0.9}}}}, map[string]int{"a": 0})
	if len(errs) > 0 {
		t.Errorf("a valid calibration: %v", errs)
	}
}
