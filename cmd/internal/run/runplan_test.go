package run

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// run --sequence-parallel against the script's own choice: on contradicts
// a script without it; auto keeps the script's.
func TestApplySequenceParallel(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	fx := parallel.Constraints{SequenceParallel: &no}
	if err := applySequenceParallel("on", &fx, true); err == nil || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("run --sequence-parallel on with a script without it: %v", err)
	}
	fx = parallel.Constraints{SequenceParallel: &yes}
	if err := applySequenceParallel("auto", &fx, true); err != nil || !*fx.SequenceParallel {
		t.Fatalf("auto changed the script's choice: %v", err)
	}
}
