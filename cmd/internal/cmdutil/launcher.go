package cmdutil

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// --launcher values: how pipette-launch reaches and starts processes on the
// hosts.
const (
	LauncherAuto  = "auto"
	LauncherSSH   = "ssh"
	LauncherSlurm = "slurm"
	// LauncherK8s runs the job as a JobSet on the cluster kubectl reaches
	// (docs/kubernetes.md); probe reads its nodes.
	LauncherK8s = "k8s"
)

// ChooseLauncher resolves --launcher: auto is slurm inside an allocation
// (SLURM_JOB_ID set), ssh otherwise; k8s (or kubernetes) only when given.
func ChooseLauncher(flag string, getenv func(string) string) (string, error) {
	switch flag {
	case "", LauncherAuto:
		if strings.TrimSpace(getenv("SLURM_JOB_ID")) != "" {
			return LauncherSlurm, nil
		}
		return LauncherSSH, nil
	case LauncherSSH, LauncherSlurm, LauncherK8s:
		return flag, nil
	case "kubernetes":
		return LauncherK8s, nil
	}
	return "", fmt.Errorf("--launcher %q: want auto, ssh, slurm or k8s", flag)
}

// CheckOneSlurmTask refuses to run as one of several tasks of an srun step
// (SLURM_STEP_NUM_TASKS above 1, as `srun -N4 pipette-launch ...` or a
// per-node torchrun habit gives): pipette-launch starts every node's ranks
// itself, so each copy would start the whole job again, on the same nodes
// and master port. The batch script, salloc's shell and a one-task step
// are one copy (a step's tasks see only the step's nodes in
// SLURM_JOB_NODELIST, so the batch script is the place to run it).
func CheckOneSlurmTask(getenv func(string) string) error {
	step := strings.TrimSpace(getenv("SLURM_STEP_ID"))
	n, err := strconv.Atoi(strings.TrimSpace(getenv("SLURM_STEP_NUM_TASKS")))
	if step == "" || err != nil || n <= 1 {
		return nil
	}
	return InputErrorf("this is one of %d tasks of Slurm step %s.%s (SLURM_STEP_NUM_TASKS=%d, this is task %s): pipette-launch starts every node's ranks itself, so each of the %d copies would start the whole job again. Run it once, in the batch script or the salloc shell, without srun: it starts its own srun steps on the allocation's nodes",
		n, getenv("SLURM_JOB_ID"), step, n, cmp.Or(strings.TrimSpace(getenv("SLURM_PROCID")), "?"), n)
}

// SlurmStepWarning is, when pipette-launch runs as the one task of an srun
// step (an `srun --pty bash` shell, srun -N1 -n1), what that costs: Slurm
// gives a step's tasks the step's nodes as SLURM_JOB_NODELIST, so the job
// is planned on those, not on the whole allocation. "" elsewhere.
func SlurmStepWarning(getenv func(string) string) string {
	step := strings.TrimSpace(getenv("SLURM_STEP_ID"))
	if step == "" || strings.TrimSpace(getenv("SLURM_JOB_ID")) == "" {
		return ""
	}
	return fmt.Sprintf("running inside Slurm step %s.%s, whose tasks see only the step's nodes (SLURM_JOB_NODELIST=%s): the job is planned on those; run pipette-launch in the batch script or the salloc shell to use the whole allocation",
		getenv("SLURM_JOB_ID"), step, getenv("SLURM_JOB_NODELIST"))
}
