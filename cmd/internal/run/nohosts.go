package run

import (
	"cmp"
	"context"
	"os"
	"strconv"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// defaultHosts gives a line that names no hosts the hosts its own launcher
// would use: torchrun's default is this machine (--nproc-per-node default
// 1); DeepSpeed's launcher reads /job/hostfile (Options.DeepSpeedHostfile) when it exists, else runs on
// this machine with every GPU. A launch, a dry run and --output-dir all
// see the same hosts; the embedded example cluster is only planned on when
// asked for (--cluster example). A line that asks for several nodes and
// names none cannot be started from here.
func defaultHosts(o *Options) error {
	if st, err := os.Stat(o.Hostfile); o.Hostfile != "" && err == nil && !st.Mode().IsRegular() {
		// DeepSpeed's fetch_hostfile: a hostfile that is no file (-H
		// /dev/null) means this machine's resources only. A path that does
		// not exist stays an error here: a typo is likelier.
		o.notes = append(o.notes, "--hostfile "+o.Hostfile+" is not a regular file: this machine only, as DeepSpeed's launcher")
		o.Hostfile = ""
	}
	if o.ClusterFile != "" || o.Hosts != "" || o.Hostfile != "" || fromSlurm(o) {
		return nil
	}
	// DeepSpeed's launcher's defaults for a line written for it (by its
	// flags, or a DeepSpeed script with no torchrun flag).
	ds := o.style == cmdutil.StyleDeepSpeed || (o.style == "" && ChooseFramework(o) == parallel.FrameworkDeepSpeed)
	if ds && o.DeepSpeedHostfile != "" {
		if _, err := os.Stat(o.DeepSpeedHostfile); err == nil {
			o.Hostfile = o.DeepSpeedHostfile
			o.notes = append(o.notes, "hosts from "+o.DeepSpeedHostfile+" (DeepSpeed's default hostfile)")
			return nil
		}
	}
	nnodes, err := ParseNNodes(o.NNodes)
	if err != nil {
		return err
	}
	if nnodes > 1 {
		return cmdutil.InputErrorf("--nnodes %d but no hosts are named: pipette-launch starts every host itself, so list them with --hosts, --hostfile or --cluster FILE (or run inside a Slurm allocation); without hosts a job runs on this machine alone", nnodes)
	}
	if ds && o.NProcPerNode == "" && o.Include == "" && o.Exclude == "" {
		// DeepSpeed's launcher: every GPU of this machine.
		gpus, why := cmdutil.LocalGPUs(context.Background())
		if n := cmdutil.VisibleGPUs(gpus, o.Env); n > 0 {
			o.defaultSlots = n
		} else {
			o.notes = append(o.notes, "one rank: DeepSpeed's launcher would use every GPU of this machine, and it has none ("+cmp.Or(why, "CUDA_VISIBLE_DEVICES hides every GPU")+")")
		}
	}
	o.Hosts, o.MasterAddr = "localhost", cmp.Or(o.MasterAddr, "127.0.0.1")
	o.standalone = true
	note := "no hosts named: this machine, as torchrun"
	if o.defaultSlots > 0 {
		note = "no hosts named: this machine with its " + strconv.Itoa(o.defaultSlots) + " GPUs, as DeepSpeed's launcher"
	}
	o.notes = append(o.notes, note)
	return nil
}
