package job

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

// scriptCase is one host script's values: what the renderer is given.
type scriptCase struct {
	name, host, workDir string
	args                []string
	env                 [][2]string
}

// hostileScripts hold the values that broke out of the script before: a
// line break in a comment, and variable names the rank wrapper's own
// variables had or env(1) took for options.
var hostileScripts = []scriptCase{
	{name: "a\ntouch PWNED\n", host: "n1", args: []string{"x"}},
	{name: "job", host: "n1\rtouch PWNED", args: []string{"a b", "it's"}},
	{name: "j\u2028x\u0085y", host: "h", args: []string{"$(touch PWNED)", "`touch PWNED`", "--x=\n"}},
	{name: "j", host: "h", args: []string{"x"}, env: [][2]string{{"__pl_rm", "/bin/echo"}, {"__pl_f", "/nonexistent"}}},
	{name: "j", host: "h", args: []string{"x"}, env: [][2]string{{"__pl_env", "/bin/false"}, {"NCCL_X", "a'b\nc"}}},
	{name: "j", host: "h", args: []string{"x"}, env: [][2]string{{"f", "1"}, {"mark", "2"}, {"-i", "an option to env"}, {"IFS", "x"}, {"A-B", "not a shell name\n"}}},
	{name: "j", host: "h", workDir: "w d\n$(x)", args: nil},
}

// The host script, run by a real sh, starts the command with exactly the
// argv and environment it was given, in its work directory, prints
// nothing of its own, and holds no line the renderer did not write.
func TestHostScriptDeliversValues(t *testing.T) {
	for _, c := range hostileScripts {
		if err := checkHostScript(t, c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
}

func FuzzHostScript(f *testing.F) {
	for _, c := range hostileScripts {
		f.Add(c.name, c.host, c.workDir, strings.Join(c.args, "\x00"), scripttest.VarsText(c.env))
	}
	f.Fuzz(func(t *testing.T, name, host, workDir, args, env string) {
		// TORCHELASTIC_RESTART_COUNT is the script's own (the restart).
		c := scriptCase{name, host, workDir, scripttest.Words(args), scripttest.Vars(env, "TORCHELASTIC_RESTART_COUNT")}
		if scripttest.Skip([]string{name, host, workDir}, len(c.args), len(c.env)) {
			return
		}
		if err := checkHostScript(t, c); err != nil {
			t.Fatal(err)
		}
	})
}

// checkHostScript renders c's script (and its skeleton, every value a
// marker) and runs it with the printer as the rank's program.
func checkHostScript(t *testing.T, c scriptCase) error {
	h := scripttest.NewHarness(t)
	wd := ""
	if c.workDir != "" {
		wd = scripttest.Component(h.Dir, c.workDir)
	}
	render := func(name, host, wd string, args []string, env [][2]string) (string, error) {
		r := RankJob{Argv: slices.Concat(h.Printer, args)}
		for _, e := range env {
			r.Env = append(r.Env, EnvVar{e[0], e[1]})
		}
		return HostScript(&Job{Name: name, WorkDir: wd, Hosts: []HostJob{{Name: host, Ranks: []RankJob{r}}}}, 0)
	}
	script, err := render(c.name, c.host, wd, c.args, c.env)
	if err != nil {
		return err
	}
	var sk scripttest.Skeleton
	skName, skHost, skWD := sk.Mark(c.name), sk.Mark(c.host), ""
	if wd != "" {
		skWD = filepath.Join(h.Dir, sk.Mark(filepath.Base(wd)))
	}
	skeleton, err := render(skName, skHost, skWD, sk.MarkAll(c.args), sk.MarkVars(c.env, ValidEnvName))
	if err != nil {
		return err
	}
	if err := scripttest.SameLines(script, skeleton, sk.Values); err != nil {
		return err
	}
	rec, err := h.Run(script)
	if err != nil {
		return err
	}
	if err := rec.Check(c.args, scripttest.WantEnv(c.env), "PWD", "OLDPWD"); err != nil { // the shell's own
		return err
	}
	if wd != "" && rec.Dir != wd {
		return fmt.Errorf("the command ran in %q, want %q", rec.Dir, wd)
	}
	return nil
}
