package templates

import (
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/model"
)

// A model that sets its dropouts is rendered with them (the memory estimate
// assumed them); one that does not leaves Megatron's default, and the
// user's own flag wins.
func TestModelShapeArgsDropout(t *testing.T) {
	m := model.Model{NumLayers: 2, Hidden: 64, Heads: 4, SeqLength: 128, Vocab: 1000}
	if got := strings.Join(ModelShapeArgs(m, false, nil), " "); strings.Contains(got, "dropout") {
		t.Errorf("unset dropouts rendered: %s", got)
	}
	got := ModelShapeArgs(m.WithoutDropout(), false, nil)
	for _, f := range []string{"--attention-dropout", "--hidden-dropout"} {
		if i := slices.Index(got, f); i < 0 || got[i+1] != "0" {
			t.Errorf("%s 0 not rendered: %v", f, got)
		}
	}
	got = ModelShapeArgs(m.WithoutDropout(), false, []string{"--hidden-dropout", "0.1"})
	if slices.Contains(got, "--hidden-dropout") {
		t.Errorf("the user's --hidden-dropout was rendered again: %v", got)
	}
}
