package run

import (
	"cmp"
	"context"
	"runtime"
	"strings"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// A job whose only host is this machine runs here without SSH, as torchrun
// runs: --standalone, or one host that is this machine (localhost, its
// name or one of its addresses, as ourselves on port 22) when --launcher is
// auto outside a Slurm allocation. --launcher ssh still goes through sshd;
// a host with a port of its own is a container, reached over SSH.

// runsHere reports whether a job on these hosts runs on this machine.
func runsHere(o *Options, hosts []remote.HostTarget) bool {
	switch o.Launcher {
	case cmdutil.LauncherSSH, cmdutil.LauncherSlurm:
		return false
	}
	if o.Standalone {
		return true
	}
	if strings.TrimSpace(cmdutil.EnvLookup(o.Env)("SLURM_JOB_ID")) != "" {
		return false
	}
	return len(hosts) == 1 && remote.IsThisMachine(hosts[0], o.SSH)
}

// jobTargets are the rendered job's hosts as the launcher reaches them.
func jobTargets(job *job.Job) []remote.HostTarget {
	out := make([]remote.HostTarget, len(job.Hosts))
	for i, h := range job.Hosts {
		out[i] = remote.HostTarget{Name: h.Name, Addr: cmp.Or(h.Address, h.Name), User: h.User, Port: h.Port}
	}
	return out
}

// localRanksPerNode is --nproc-per-node gpu|auto|cpu on this machine,
// torchrun's determine_local_world_size: gpu = the GPUs (an error without
// one), auto = the GPUs, else one rank per CPU this process may run on,
// cpu = one rank per CPU.
func localRanksPerNode(o *Options) (int, error) {
	if o.NProcPerNode == "cpu" {
		return runtime.NumCPU(), nil
	}
	gpus, why := cmdutil.LocalGPUs(context.Background())
	visible := cmdutil.VisibleGPUs(gpus, o.Env)
	if visible == 0 && gpus > 0 {
		why = "CUDA_VISIBLE_DEVICES hides every GPU"
	}
	switch {
	case visible > 0:
		return visible, nil
	case o.NProcPerNode == "gpu":
		return 0, cmdutil.InputErrorf("--nproc-per-node gpu: this machine has no GPU to run on (%s); give a number of ranks, or auto for one rank per CPU", why)
	}
	return runtime.NumCPU(), nil
}
