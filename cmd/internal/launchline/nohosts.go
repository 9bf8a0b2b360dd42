package launchline

import (
	"cmp"
	"context"
	"os"
	"strconv"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

// DefaultHosts gives a line that names no hosts the hosts its own launcher
// would use: torchrun's default is this machine (--nproc-per-node default
// 1); DeepSpeed's launcher reads /job/hostfile (Line.DeepSpeedHostfile) when it exists, else runs on
// this machine with every GPU. A launch, a dry run and --output-dir all
// see the same hosts; the embedded example cluster is only planned on when
// asked for (--cluster example). A line that asks for several nodes and
// names none cannot be started from here. named says hosts come from
// elsewhere (a cluster file, the Slurm allocation); deepSpeedScript that
// the script is a DeepSpeed one (DeepSpeed's launcher's defaults apply to
// a line with no launcher's flags); env is the environment pipette-launch
// runs in (CUDA_VISIBLE_DEVICES).
func (l *Line) DefaultHosts(named, deepSpeedScript bool, env []string) error {
	if st, err := os.Stat(l.Hostfile); l.Hostfile != "" && err == nil && !st.Mode().IsRegular() {
		// DeepSpeed's fetch_hostfile: a hostfile that is no file (-H
		// /dev/null) means this machine's resources only. A path that does
		// not exist stays an error here: a typo is likelier.
		l.Notes = append(l.Notes, "--hostfile "+l.Hostfile+" is not a regular file: this machine only, as DeepSpeed's launcher")
		l.Hostfile = ""
	}
	if named || l.Hosts != "" || l.Hostfile != "" {
		return nil
	}
	// DeepSpeed's launcher's defaults for a line written for it (by its
	// flags, or a DeepSpeed script with no torchrun flag).
	ds := l.Style == StyleDeepSpeed || (l.Style == "" && deepSpeedScript)
	if ds && l.DeepSpeedHostfile != "" {
		if _, err := os.Stat(l.DeepSpeedHostfile); err == nil {
			l.Hostfile = l.DeepSpeedHostfile
			l.Notes = append(l.Notes, "hosts from "+l.DeepSpeedHostfile+" (DeepSpeed's default hostfile)")
			return nil
		}
	}
	nodes, err := ParseNNodes(l.NNodes)
	if err != nil {
		return err
	}
	if nodes.Min > 1 {
		return cmdutil.InputErrorf("--nnodes %s but no hosts are named: pipette-launch starts every host itself, so list them with --hosts, --hostfile or --cluster FILE (or run inside a Slurm allocation); without hosts a job runs on this machine alone", l.NNodes)
	}
	if ds && l.NProcPerNode == "" && l.Include == "" && l.Exclude == "" {
		// DeepSpeed's launcher: every GPU of this machine.
		gpus, why := cmdutil.LocalGPUs(context.Background())
		if n := cmdutil.VisibleGPUs(gpus, env); n > 0 {
			l.DefaultSlots = n
		} else {
			l.Notes = append(l.Notes, "one rank: DeepSpeed's launcher would use every GPU of this machine, and it has none ("+cmp.Or(why, "CUDA_VISIBLE_DEVICES hides every GPU")+")")
		}
	}
	l.Hosts, l.MasterAddr = "localhost", cmp.Or(l.MasterAddr, "127.0.0.1")
	l.Standalone = true
	note := "no hosts named: this machine, as torchrun"
	if l.DefaultSlots > 0 {
		note = "no hosts named: this machine with its " + strconv.Itoa(l.DefaultSlots) + " GPUs, as DeepSpeed's launcher"
	}
	l.Notes = append(l.Notes, note)
	return nil
}
