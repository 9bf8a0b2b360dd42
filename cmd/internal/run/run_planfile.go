package run

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/atomicfile"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// RunPlanFile is where run leaves its plan in --log-dir, in plan --json's
// form, for calibrate.
const RunPlanFile = "pipette-plan.json"

// WriteRunPlan saves a planned run's plan in its --log-dir.
func WriteRunPlan(opts *Options, plan *search.Plan) error {
	if opts.LogDir == "" || opts.searched == nil {
		return nil
	}
	res := search.Result{Model: opts.searched.result.Model, Plans: []search.Plan{*plan}}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.OwnDir(opts.LogDir, false); err != nil {
		return cmdutil.InputErrorf("--log-dir %v", err)
	}
	// Renamed into place: a link planted at the name is replaced, never
	// written through.
	if err := atomicfile.Write(filepath.Join(opts.LogDir, RunPlanFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--log-dir: %w", err)
	}
	return nil
}
