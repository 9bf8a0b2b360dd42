package cmdutil

import (
	"errors"
	"strings"
	"testing"
)

func TestChooseLauncher(t *testing.T) {
	t.Parallel()
	in := func(k string) string { return map[string]string{"SLURM_JOB_ID": "42"}[k] }
	out := func(string) string { return "" }
	for _, tc := range []struct {
		flag   string
		getenv func(string) string
		want   string
		err    string
	}{
		{"auto", in, LauncherSlurm, ""},
		{"", in, LauncherSlurm, ""},
		{"auto", out, LauncherSSH, ""},
		{"ssh", in, LauncherSSH, ""},
		{"slurm", out, LauncherSlurm, ""},
		{"k8s", in, LauncherK8s, ""},
		{"kubernetes", out, LauncherK8s, ""},
		{"srun", out, "", `--launcher "srun": want auto, ssh, slurm or k8s`},
	} {
		got, err := ChooseLauncher(tc.flag, tc.getenv)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("chooseLauncher(%q) = %q, %v; want %q, %q", tc.flag, got, err, tc.want, tc.err)
		}
	}
}

// TestCheckOneSlurmTask: only a task of a step of several is refused; the
// batch script and salloc's shell (no step), a one-task step and values
// that are not counts pass. TestRunRefusedAsSrunTasks (cmd/internal/run)
// runs it under a real srun.
func TestCheckOneSlurmTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" = passes
	}{
		{"no Slurm", nil, ""},
		{"batch script", map[string]string{"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4", "SLURM_PROCID": "0"}, ""},
		{"one-task step", map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_PROCID": "0"}, ""},
		{"count not a number", map[string]string{"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "x"}, ""},
		{"task 3 of 4", map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "3"},
			"one of 4 tasks of Slurm step 7.2 (SLURM_STEP_NUM_TASKS=4, this is task 3)"},
		{"task 0 of 2", map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_PROCID": "0"},
			"each of the 2 copies would start the whole job again"},
	} {
		err := CheckOneSlurmTask(func(k string) string { return tc.env[k] })
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		case tc.want != "" && !errors.As(err, new(*InputError)):
			t.Errorf("%s: %v is not an input error (exit 2)", tc.name, err)
		}
	}
}

// TestSlurmStepWarning: only a process inside a step of an allocation is
// warned; the batch script's environment (as a real sbatch gives it: no
// SLURM_STEP_ID) and a machine without Slurm are not.
func TestSlurmStepWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no Slurm", nil, ""},
		{"batch script", map[string]string{"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NTASKS": "2", "SLURM_PROCID": "0"}, ""},
		{"srun --pty bash", map[string]string{"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_JOB_NODELIST": "node1"},
			"running inside Slurm step 7.0, whose tasks see only the step's nodes (SLURM_JOB_NODELIST=node1)"},
	} {
		got := SlurmStepWarning(func(k string) string { return tc.env[k] })
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
