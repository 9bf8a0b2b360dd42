package cmdutil

import (
	"fmt"
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
