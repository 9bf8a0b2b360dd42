package job

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/scripttest"
)

func TestMain(m *testing.M) { scripttest.Main(m) }

// scriptCase is one host script's values: what the renderer is given.
type scriptCase struct {
	name, host, workDir string
	args                []string
	env                 []EnvVar
}

// hostile holds the values that broke out of the script before: a line
// break in a comment, quotes, and variable names the script's own rank
// wrapper uses.
var hostileScripts = []scriptCase{
	{name: "a\ntouch PWNED\n", host: "n1", args: []string{"x"}},
	{name: "job", host: "n1\rtouch PWNED", args: []string{"a b", "it's"}},
	{name: "j\u2028x\u0085y", host: "h", args: []string{"$(touch PWNED)", "`touch PWNED`", "--x=\n"}},
	{name: "j", host: "h", args: []string{"x"}, env: []EnvVar{{"__pl_rm", "/bin/echo"}, {"__pl_f", "/nonexistent"}}},
	{name: "j", host: "h", args: []string{"x"}, env: []EnvVar{{"__pl_env", "/bin/false"}, {"NCCL_X", "a'b\nc"}}},
	{name: "j", host: "h", args: []string{"x"}, env: []EnvVar{{"f", "1"}, {"mark", "2"}, {"-i", "an option to env"}, {"IFS", "x"}, {"A-B", "not a shell name\n"}}},
	{name: "j", host: "h", workDir: "w d\n$(x)", args: nil},
}

// The host script, run by a real sh, starts the command with exactly the
// argv and environment it was given, in its work directory, prints
// nothing of its own, and holds no line the renderer did not write.
func TestHostScriptDeliversValues(t *testing.T) {
	for _, c := range hostileScripts {
		if err := checkHostScript(t, c); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func FuzzHostScript(f *testing.F) {
	for _, c := range hostileScripts {
		f.Add(c.name, c.host, c.workDir, strings.Join(c.args, "\x00"), envText(c.env))
	}
	f.Fuzz(func(t *testing.T, name, host, workDir, args, env string) {
		c := scriptCase{name: name, host: host, workDir: workDir}
		if args != "" {
			c.args = strings.Split(args, "\x00")
		}
		seen := map[string]bool{}
		for _, kv := range strings.Split(env, "\x00") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || seen[k] || k == "TORCHELASTIC_RESTART_COUNT" || strings.ContainsRune(v, 0) {
				continue
			}
			seen[k] = true
			c.env = append(c.env, EnvVar{k, v})
		}
		if strings.ContainsRune(name+host+workDir, 0) || len(c.args) > 8 || len(c.env) > 8 {
			return
		}
		if err := checkHostScript(t, c); err != nil {
			t.Fatal(err)
		}
	})
}

func envText(env []EnvVar) string {
	var kv []string
	for _, e := range env {
		kv = append(kv, e.Name+"="+e.Value)
	}
	return strings.Join(kv, "\x00")
}

// checkHostScript renders c's script (and its skeleton, every value a
// marker) and runs it with the printer as the rank's program.
func checkHostScript(t *testing.T, c scriptCase) error {
	dir := t.TempDir()
	out := filepath.Join(dir, "record")
	// The work directory: one new directory under dir, whatever the value
	// holds (no escape from dir, no NUL).
	wd := ""
	if c.workDir != "" {
		comp := strings.ReplaceAll(c.workDir, "/", "_")
		if comp == "." || comp == ".." || len(comp) > 200 {
			comp = "w" + comp[:min(len(comp), 200)]
		}
		wd = filepath.Join(dir, comp)
	}
	render := func(name, host, wd string, args []string, env []EnvVar) (string, error) {
		j := &Job{Name: name, WorkDir: wd, Hosts: []HostJob{{Name: host, Ranks: []RankJob{{
			Argv: append(scripttest.Printer(t, out), args...), Env: env}}}}}
		return HostScript(j, 0)
	}
	script, err := render(c.name, c.host, wd, c.args, c.env)
	if err != nil {
		return err
	}
	// The skeleton: every value a marker (a name keeps whether a shell
	// can export it, which picks the template's branch).
	var values []string
	mark := func(v string) string {
		values = append(values, v)
		return scripttest.Marker(len(values) - 1)
	}
	skName, skHost := mark(c.name), mark(c.host)
	skWD := ""
	if wd != "" {
		skWD = filepath.Join(dir, mark(filepath.Base(wd)))
	}
	var skArgs []string
	for _, a := range c.args {
		skArgs = append(skArgs, mark(a))
	}
	var skEnv []EnvVar
	for _, e := range c.env {
		n := mark(e.Name)
		if !ValidEnvName(e.Name) {
			n = "9" + n
		}
		skEnv = append(skEnv, EnvVar{n, mark(e.Value)})
	}
	skeleton, err := render(skName, skHost, skWD, skArgs, skEnv)
	if err != nil {
		return err
	}
	if err := scripttest.SameLines(script, skeleton, values); err != nil {
		return err
	}
	stdout, stderr, err := scripttest.Run(script, dir, 30*time.Second)
	if err != nil || stdout != "" || stderr != "" {
		return fmt.Errorf("script: %v; stdout %q; stderr %q", err, stdout, stderr)
	}
	rec, err := scripttest.Read(out)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, e := range c.env {
		want[e.Name] = e.Value
	}
	if _, ok := want["PATH"]; !ok {
		want["PATH"] = scripttest.HarnessPath
	}
	if err := rec.Check(c.args, want, "PWD", "OLDPWD"); err != nil { // the shell's own
		return err
	}
	if wd != "" && rec.Dir != wd {
		return fmt.Errorf("the command ran in %q, want %q", rec.Dir, wd)
	}
	return nil
}
