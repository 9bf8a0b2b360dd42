// Package scripttest runs generated shell scripts in a harness, for tests
// and fuzz targets only: a printer program stands in for the command a
// script starts and records the argv and environment it was given, so a
// test can check that every value reached the command byte for byte
// through a real sh.
package scripttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// printerArg, as the test binary's first argument, makes it the printer.
const printerArg = "-pipette-scripttest-printer"

// Main is a test package's TestMain: the test binary is the printer when
// started as one, else it runs the tests.
func Main(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == printerArg {
		if err := record(os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "scripttest printer:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Printer is the argv prefix of a command that records, into file out, the
// words that follow it, its environment and its working directory. The
// package's TestMain must be Main.
func Printer(t testing.TB, out string) []string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{self, printerArg, out}
}

// Harness is one check's directory (a fresh t.TempDir) and the printer
// that records into it.
type Harness struct {
	Dir     string   // the script's directory, and the one it runs in
	Printer []string // the argv prefix of the command the script starts
	out     string
}

// NewHarness makes a harness in a fresh directory. The package's TestMain
// must be Main.
func NewHarness(t testing.TB) *Harness {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "record")
	return &Harness{Dir: dir, Printer: Printer(t, out), out: out}
}

// Run runs script as Run does (30 s at most) in h.Dir with env
// (NAME=VALUE) added, and returns what the printer saw. A script that
// fails, prints anything of its own or never starts the printer is an
// error: a generated script's only output is its command's.
func (h *Harness) Run(script string, env ...string) (Record, error) {
	stdout, stderr, err := Run(script, h.Dir, 30*time.Second, env...)
	if err != nil || stdout != "" || stderr != "" {
		return Record{}, fmt.Errorf("script: %v; stdout %q; stderr %q", err, stdout, stderr)
	}
	return Read(h.out)
}

// Record is what the printer saw.
type Record struct {
	Args []string          // the words after Printer's prefix
	Env  map[string]string // its whole environment
	Dir  string            // its working directory
}

// record writes: the working directory, the argument count, the
// arguments, then NAME=VALUE per variable, each ended by NUL (no argument
// or variable can hold one).
func record(out string, args []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	for _, s := range append(append([]string{wd, strconv.Itoa(len(args))}, args...), os.Environ()...) {
		b.WriteString(s)
		b.WriteByte(0)
	}
	return os.WriteFile(out, b.Bytes(), 0o600)
}

// Read reads the printer's record from file out.
func Read(out string) (Record, error) {
	data, err := os.ReadFile(out)
	if err != nil {
		return Record{}, fmt.Errorf("the printer did not run: %w", err)
	}
	parts := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	if len(parts) < 2 {
		return Record{}, fmt.Errorf("printer record %q is short", data)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 0 || 2+n > len(parts) {
		return Record{}, fmt.Errorf("printer record %q: bad argument count", data)
	}
	r := Record{Dir: parts[0], Args: parts[2 : 2+n], Env: map[string]string{}}
	if n == 0 {
		r.Args = nil
	}
	for _, kv := range parts[2+n:] {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		r.Env[k] = v
	}
	return r, nil
}

// Check compares a record with the argv words and variables a command was
// given: the words exactly, each variable with its value, and no other
// variable except those named in extra (what the harness and the shell
// add, such as PATH and PWD).
func (r Record) Check(args []string, env map[string]string, extra ...string) error {
	if !slices.Equal(r.Args, args) && !(len(r.Args) == 0 && len(args) == 0) {
		return fmt.Errorf("argv %q, want %q", r.Args, args)
	}
	for k, v := range env {
		got, ok := r.Env[k]
		switch {
		case !ok:
			return fmt.Errorf("variable %q missing (want %q)", k, v)
		case got != v:
			return fmt.Errorf("variable %q = %q, want %q", k, got, v)
		}
	}
	for k, v := range r.Env {
		if _, given := env[k]; !given && !slices.Contains(extra, k) {
			return fmt.Errorf("variable %q=%q was not given", k, v)
		}
	}
	return nil
}

// HarnessPath is the only variable Run passes to a script (with PATH set
// to it), so that nothing of the test's environment reaches the command.
const HarnessPath = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

// Run checks script's syntax with sh -n, then runs it with sh in dir with
// the environment PATH=HarnessPath plus env (NAME=VALUE), and returns its
// stdout and stderr. A script that runs longer than timeout fails.
func Run(script, dir string, timeout time.Duration, env ...string) (stdout, stderr string, err error) {
	path := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return "", "", err
	}
	if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
		return "", string(out), fmt.Errorf("sh -n: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", path)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + HarnessPath}, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("script ran past %s: %w", timeout, ctx.Err())
	}
	return o.String(), e.String(), err
}

// Marker is value i's stand-in in a skeleton render (see SameLines):
// lower-case letters and digits, which every escaper and name rule keeps.
func Marker(i int) string { return fmt.Sprintf("pipetteval%dx", i) }

// SameLines checks that script holds no line its renderer did not write.
// skeleton is the same render with each values[i] replaced by Marker(i).
// Each skeleton line without a marker must be a line of script, in the
// same order; a line with markers stands for one line plus the line breaks
// of its values, except a value in a comment (after a '#' that starts the
// line or follows a blank), which must add none: a comment is one line.
// The first and last of those lines must keep the skeleton line's text
// before the word of its first marker and after the word of its last.
func SameLines(script, skeleton string, values []string) error {
	sl := strings.Split(script, "\n")
	i := 0
	for ln, t := range strings.Split(skeleton, "\n") {
		n, first, last := 1, -1, -1
		for k, v := range values {
			m := Marker(k)
			for at := 0; ; {
				p := strings.Index(t[at:], m)
				if p < 0 {
					break
				}
				p += at
				if first < 0 || p < first {
					first = p
				}
				last = max(last, p+len(m))
				if !inComment(t[:p]) {
					n += strings.Count(v, "\n")
				}
				at = p + len(m)
			}
		}
		if i+n > len(sl) {
			return fmt.Errorf("script ends before skeleton line %d %q", ln+1, t)
		}
		got := sl[i : i+n]
		// Quoting may take in the rest of the value's word: compare up to
		// the blank before the first marker and from the blank after the
		// last.
		prefix := t[:strings.LastIndexAny(t[:max(first, 0)], " \t")+1]
		suffix := ""
		if last >= 0 {
			if b := strings.IndexAny(t[last:], " \t"); b >= 0 {
				suffix = t[last+b:]
			}
		}
		switch {
		case first < 0 && got[0] != t:
			return fmt.Errorf("script line %d is %q, want the renderer's %q", i+1, got[0], t)
		case first >= 0 && (!strings.HasPrefix(got[0], prefix) || !strings.HasSuffix(got[n-1], suffix)):
			return fmt.Errorf("script lines %d-%d %q do not fit the renderer's line %q", i+1, i+n, got, t)
		}
		i += n
	}
	if i != len(sl) {
		return fmt.Errorf("script has %d lines the renderer did not write: %q", len(sl)-i, sl[i:])
	}
	return nil
}

// inComment reports whether text after prefix, on one line, is in a
// comment: a '#' starts the line or follows a blank.
func inComment(prefix string) bool {
	for j := 0; j < len(prefix); j++ {
		if prefix[j] == '#' && (strings.TrimLeft(prefix[:j], " \t") == "" || prefix[j-1] == ' ' || prefix[j-1] == '\t') {
			return true
		}
	}
	return false
}

// Skeleton collects the values of one render in the order they are marked
// and stands Marker(i) in for values[i], to render the skeleton SameLines
// compares with.
type Skeleton struct{ Values []string }

// Mark records v and returns its marker.
func (s *Skeleton) Mark(v string) string {
	s.Values = append(s.Values, v)
	return Marker(len(s.Values) - 1)
}

// MarkAll marks each of words, in order.
func (s *Skeleton) MarkAll(words []string) []string {
	var out []string
	for _, w := range words {
		out = append(out, s.Mark(w))
	}
	return out
}

// MarkVars marks each variable's name (MarkName, with exportable the
// renderer's own test of a name) and value, in order.
func (s *Skeleton) MarkVars(vars [][2]string, exportable func(string) bool) [][2]string {
	var out [][2]string
	for _, v := range vars {
		out = append(out, [2]string{s.MarkName(v[0], exportable(v[0])), s.Mark(v[1])})
	}
	return out
}

// MarkName is Mark for a variable's name: the marker is a name a shell can
// export exactly when v is one, so the skeleton takes the renderer's same
// branch.
func (s *Skeleton) MarkName(v string, exportable bool) string {
	if exportable {
		return s.Mark(v)
	}
	return "9" + s.Mark(v)
}

// MaxItems bounds a fuzz input's words and variables: more make a run
// longer, not a new case.
const MaxItems = 8

// Skip reports whether a fuzz target passes over an input: one of values
// (each a single string the renderer is given: a name, a host, a file's
// content) holds a NUL, which no argv word, variable or file name can, or
// one of lists (the counts of Words and Vars) is longer than MaxItems. The
// NUL-separated texts Words and Vars read are not values: their NULs are
// what separate the words.
func Skip(values []string, lists ...int) bool {
	for _, v := range values {
		if strings.IndexByte(v, 0) >= 0 {
			return true
		}
	}
	for _, n := range lists {
		if n > MaxItems {
			return true
		}
	}
	return false
}

// Words splits a fuzz input into words at NUL (none for "").
func Words(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}

// Vars reads a fuzz input of NAME=VALUE items separated by NUL: items
// without a name, repeated names and the names in skip are left out.
func Vars(s string, skip ...string) [][2]string {
	var out [][2]string
	seen := map[string]bool{}
	for _, kv := range Words(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || seen[k] || slices.Contains(skip, k) {
			continue
		}
		seen[k] = true
		out = append(out, [2]string{k, v})
	}
	return out
}

// VarsText is Vars' input for vars: a seed.
func VarsText(vars [][2]string) string {
	var kv []string
	for _, v := range vars {
		kv = append(kv, v[0]+"="+v[1])
	}
	return strings.Join(kv, "\x00")
}

// WantEnv is the environment a command given vars sees under Run: vars,
// and Run's PATH unless vars set one.
func WantEnv(vars [][2]string) map[string]string {
	want := map[string]string{"PATH": HarnessPath}
	for _, v := range vars {
		want[v[0]] = v[1]
	}
	return want
}

// Component is dir joined with one new path component made from v: its
// slashes replaced, "." and ".." and over-long names prefixed and cut, so
// a fuzzed value names a directory inside dir.
func Component(dir, v string) string {
	c := strings.ReplaceAll(v, "/", "_")
	if c == "" || c == "." || c == ".." || len(c) > 200 {
		c = "w" + c[:min(len(c), 200)]
	}
	return filepath.Join(dir, c)
}
