package cmdutil

import "testing"

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
