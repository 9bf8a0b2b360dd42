package run

import (
	"slices"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// slurmFor returns the allocation a run starts in when --launcher picks
// Slurm (nil for SSH). Every host of the job must be one of its nodes.
func slurmFor(o *Options, job *job.Job) (*remote.Slurm, error) {
	getenv := cmdutil.EnvLookup(o.Env)
	which, err := cmdutil.ChooseLauncher(o.Launcher, getenv)
	if err != nil || which != cmdutil.LauncherSlurm {
		return nil, cmdutil.AsInputError(err)
	}
	s, nodes, err := remote.SlurmFromEnv(getenv)
	if err != nil {
		return nil, cmdutil.InputErrorf("--launcher slurm: %v", err)
	}
	for _, h := range job.Hosts {
		if !slices.Contains(nodes, h.Name) {
			return nil, cmdutil.InputErrorf("--launcher slurm: host %s is not a node of Slurm job %s (SLURM_JOB_NODELIST: %s): plan on the allocation's nodes, or use --launcher ssh", h.Name, s.JobID, strings.Join(nodes, ","))
		}
	}
	s.Env = o.Env
	return &s, nil
}
