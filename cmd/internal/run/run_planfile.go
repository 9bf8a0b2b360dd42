package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
	if err := os.MkdirAll(opts.LogDir, 0o755); err != nil {
		return fmt.Errorf("--log-dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.LogDir, RunPlanFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--log-dir: %w", err)
	}
	return nil
}
