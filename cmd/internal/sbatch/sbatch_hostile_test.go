package sbatch

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
)

func sbatchApp(io *cmdutil.IOStreams) *cli.App {
	s := NewCmd(io)
	return cmdutil.NewApp(io, s, s)
}

// Values that cannot be written as the user meant them in an #SBATCH line
// are refused by name (exit 2), before anything is written: a line break
// would start a command, which also ends every directive after it.
func TestSbatchRefusesValuesItCannotWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--time", "1:00:00\ntouch PWNED"}, "--time"},
		{[]string{"--time", "banana"}, `--time "banana": want a Slurm time limit`},
		{[]string{"--time", "1:2:3:4"}, "--time"},
		{[]string{"--job-name", "jn\n#SBATCH --uid=0"}, "--job-name"},
		{[]string{"--job-name", "my-hetjob"}, "heterogeneous"},
		{[]string{"--run-id", "a\ntouch PWNED\n"}, "--run-id (or PET_RDZV_ID)"},
		{[]string{"--sbatch-arg", "--exclusive\ntouch PWNED"}, "--sbatch-arg"},
		{[]string{"--sbatch-arg", "exclusive"}, "want an sbatch option"},
		{[]string{"--partition", "p;x"}, `--partition "p;x"`},
		{[]string{"--partition", "p x"}, "--partition"},
		{[]string{"--account", "a,b"}, "--account"},
		{[]string{"--time", "1:00:00", "--signal-before", "-5m"}, "--signal-before -5m0s"},
		{[]string{"--time", "1:00:00", "--signal-before", "999h"}, "at most 65535 s"},
		{[]string{"--time", "1:00:00", "--signal-before", "1500ms"}, "whole seconds"},
		{[]string{"--time", "1", "--signal-before", "2m"}, "not shorter than --time 1"},
		{[]string{"--time", "1:00:00", "--stop-grace", "5m"}, "--signal-before 2m0s is not longer than --stop-grace 5m0s"},
		{[]string{"--time", "1:00:00", "--signal-before", "30s"}, "--signal-before 30s is not longer than --stop-grace 30s"},
	} {
		args := append(append([]string{"pipette-launch", "sbatch", "--hosts", "n1"}, tc.args...), "--no-check-script", "train.py")
		code, out, errOut := cmdtest.Exec(sbatchApp, args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%q: exit %d, want 2 naming %q; stderr: %s\nstdout: %s", tc.args, code, tc.want, errOut, out)
		}
	}
}

// Values Slurm can take are written so that Slurm reads them back as given,
// every directive before the first command.
func TestSbatchWritesValuesSlurmReadsBack(t *testing.T) {
	t.Parallel()
	code, out, errOut := cmdtest.Exec(sbatchApp, "pipette-launch", "sbatch", "--hosts", "n1", "--job-name", `my "job" #1 \ x`,
		"--time", "2-12:30", "--signal-before", "5m", "--partition", "gpu,gpu-long", "--account", "proj_1.a",
		"--sbatch-arg", "--exclusive", "--no-check-script", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got := slurmDirectives(t, out)
	want := []string{"--job-name=my \"job\" #1 \\ x", "--nodes=1", "--ntasks-per-node=1", "--nodelist=n1", "--time=2-12:30",
		"--signal=B:TERM@300", "--partition=gpu,gpu-long", "--account=proj_1.a", "--exclusive"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Slurm reads the directives as\n%q\nwant\n%q\nscript:\n%s", got, want, out)
	}
}

// --env reaches the run inside the allocation, each value as given (it
// panicked: run's --env flag was no flag.Getter).
func TestSbatchPassesEnvOn(t *testing.T) {
	t.Parallel()
	code, out, errOut := cmdtest.Exec(sbatchApp, "pipette-launch", "sbatch", "--hosts", "n1", "--env", "A=b", "--env", "C=d e,f",
		"--no-check-script", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, " --env A=b --env 'C=d e,f' ") {
		t.Errorf("the inner run lacks the --env flags as given:\n%s", out)
	}
}

// slurmDirectives reads a batch script's directives as Slurm's sbatch does
// (src/sbatch/opt.c: _opt_batch_script and _get_argument): #SBATCH lines up
// to the first command line, each cut into words at blanks, with '"' and
// '\” quoting, '\' escaping and '#' starting a comment.
func slurmDirectives(t *testing.T, script string) []string {
	t.Helper()
	var words []string
	for _, line := range strings.Split(script, "\n") {
		rest, ok := strings.CutPrefix(line, "#SBATCH")
		if !ok {
			if s := strings.TrimLeft(line, " \t\v\f\r"); s != "" && s[0] != '#' {
				break // the first command
			}
			continue
		}
		for {
			w, n, err := slurmArgument(rest)
			if err != nil {
				t.Fatalf("sbatch would refuse line %q: %v", line, err)
			}
			if n == 0 {
				break
			}
			if w != "" {
				words = append(words, w)
			}
			rest = rest[n:]
		}
	}
	return words
}
