package run

import (
	"cmp"
	"context"
	"os/exec"
	"runtime"
	"strings"
	"time"

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
	if o.standalone {
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

// localGPUs counts this machine's GPUs with nvidia-smi -L (no torch import
// needed); 0 with the reason when there are none.
func localGPUs(ctx context.Context) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		if _, lerr := exec.LookPath("nvidia-smi"); lerr != nil {
			return 0, "nvidia-smi is not installed"
		}
		return 0, "nvidia-smi -L failed: " + err.Error()
	}
	n := countGPUs(string(out))
	if n == 0 {
		return 0, "nvidia-smi -L lists no GPU"
	}
	return n, ""
}

// countGPUs counts the GPU lines of nvidia-smi -L ("GPU 0: NVIDIA H100
// 80GB HBM3 (UUID: GPU-...)"); MIG devices are indented lines under them.
func countGPUs(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "GPU ") {
			n++
		}
	}
	return n
}

// visibleGPUs is n GPUs as CUDA_VISIBLE_DEVICES narrows them for the ranks
// (which inherit it here), as torch.cuda.device_count() counts: the list up
// to its first invalid entry, at most n.
func visibleGPUs(n int, env []string) int {
	v, set := "", false
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == "CUDA_VISIBLE_DEVICES" {
			v, set = val, true
		}
	}
	if !set {
		return n
	}
	count := 0
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" || strings.HasPrefix(e, "-") {
			break
		}
		count++
	}
	return min(count, n)
}

// localRanksPerNode is --nproc-per-node gpu|auto on this machine, torchrun's
// determine_local_world_size: gpu = the GPUs (an error without one), auto =
// the GPUs, else one rank per CPU this process may run on.
func localRanksPerNode(o *Options) (int, error) {
	gpus, why := localGPUs(context.Background())
	visible := visibleGPUs(gpus, o.Env)
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
