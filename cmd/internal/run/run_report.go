package run

import (
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/report"
)

// searchedPlans is a run's search, kept for its report.
type searchedPlans struct {
	model  model.Model
	result *search.Result
}

// writeRunReport draws the plans a run searched, the one it uses first.
func writeRunReport(o *Options, c *cluster.Cluster) error {
	if !o.Report.Wanted() {
		return nil
	}
	if o.searched == nil {
		return cmdutil.InputErrorf("--report/--svg draw a planned job: give --cluster FILE (or none, for the embedded example) and a model; jobs on --hosts, --hostfile or Slurm's node list and plain torch jobs run in torchrun's order, unplanned")
	}
	in := report.Input{Cluster: c, Model: o.searched.model, Result: o.searched.result, Chosen: o.PlanIndex - 1}
	if err := cmdutil.WriteReport(o.Report, in, o.ClusterFile, o.IO); err != nil {
		return &cmdutil.InputError{Msg: err.Error()}
	}
	return nil
}
