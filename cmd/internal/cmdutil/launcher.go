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
)

// ChooseLauncher resolves --launcher: auto is slurm inside an allocation
// (SLURM_JOB_ID set), ssh otherwise.
func ChooseLauncher(flag string, getenv func(string) string) (string, error) {
	switch flag {
	case "", LauncherAuto:
		if strings.TrimSpace(getenv("SLURM_JOB_ID")) != "" {
			return LauncherSlurm, nil
		}
		return LauncherSSH, nil
	case LauncherSSH, LauncherSlurm:
		return flag, nil
	}
	return "", fmt.Errorf("--launcher %q: want auto, ssh or slurm", flag)
}
