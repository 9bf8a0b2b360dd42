package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestOutputDirNeverFollowsLinksNorReplaces (issue 31, item 3): links
// planted in --output-dir, dangling or not, are never written through, and
// a file already there (the user's own n1.sh) is not replaced: exit 2,
// naming them, nothing written. --force replaces the entries themselves;
// the link's target is still untouched.
func TestOutputDirNeverFollowsLinksNorReplaces(t *testing.T) {
	base := t.TempDir()
	od := filepath.Join(base, "od")
	if err := os.Mkdir(od, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(base, "victim.txt")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("../victim.txt", filepath.Join(od, "n1.sh"))
	os.Symlink("../made-by-link", filepath.Join(od, "n2.sh"))
	os.WriteFile(filepath.Join(od, "n3.sh"), []byte("# the user's own\n"), 0o755)
	args := []string{"--output-dir", od, "--hosts", "n1,n2,n3", "--no-check-script", "train.py"}
	code, out, errOut := runCLI(t, args...)
	if code != 2 || !strings.Contains(errOut, filepath.Join(od, "n1.sh")+", "+filepath.Join(od, "n2.sh")+", "+filepath.Join(od, "n3.sh")+" already there") ||
		!strings.Contains(errOut, "--force") {
		t.Errorf("exit %d, stderr %q; want 2 naming n1.sh, n2.sh, n3.sh and --force", code, errOut)
	}
	if strings.Contains(out, "wrote ") {
		t.Errorf("a refused --output-dir wrote files:\n%s", out)
	}
	checkVictim := func() {
		t.Helper()
		if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
			t.Errorf("victim.txt holds %q", b)
		}
		if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
			t.Errorf("victim.txt mode %v; want 0644", st.Mode().Perm())
		}
		if _, err := os.Lstat(filepath.Join(base, "made-by-link")); err == nil {
			t.Errorf("the dangling link's target was created")
		}
	}
	checkVictim()
	if b, _ := os.ReadFile(filepath.Join(od, "n3.sh")); string(b) != "# the user's own\n" {
		t.Errorf("the user's n3.sh was replaced: %q", b)
	}
	code, _, errOut = runCLI(t, append([]string{"--force"}, args...)...)
	if code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	checkVictim()
	for _, h := range []string{"n1", "n2", "n3"} {
		fi, err := os.Lstat(filepath.Join(od, h+".sh"))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s.sh after --force: %v, %v; want a regular file, mode 0700", h, fi, err)
		}
	}
	// Run again without --force: the scripts are there now.
	if code, _, errOut := runCLI(t, args...); code != 2 || !strings.Contains(errOut, "already there") {
		t.Errorf("second run without --force: exit %d, %s; want 2", code, errOut)
	}
}

// TestOutputDirRefusesUnsafeDirectory (issue 31, items 3 and 14): a
// directory others can write, a symlink, a regular file, and for scripts
// holding HF_TOKEN a directory others can read, are bad input (exit 2) with
// what to do; a new directory is made 0700.
func TestOutputDirRefusesUnsafeDirectory(t *testing.T) {
	base := t.TempDir()
	mkdir := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		os.Mkdir(p, mode)
		os.Chmod(p, mode)
		return p
	}
	file := filepath.Join(base, "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	link := filepath.Join(base, "link")
	os.Symlink(mkdir("target", 0o700), link)
	for _, c := range []struct {
		name, dir string
		env       []string
		want      string
	}{
		{"world-writable", mkdir("world", 0o777), nil, "--output-dir " + base + "/world can be written by other users (mode 0777)"},
		{"symlink", link, nil, "--output-dir " + link + " is a symbolic link: give the directory itself"},
		{"regular file", file, nil, "--output-dir " + file + " is a file, not a directory"},
		{"secret in readable dir", mkdir("readable", 0o755), []string{"--env", "HF_TOKEN=hf_x"},
			"--output-dir " + base + "/readable can be read by other users (mode 0755) and the files would hold secrets: chmod 700 it, or give a new directory (made mode 0700) (the scripts hold HF_TOKEN)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append(append([]string{"--output-dir", c.dir, "--hosts", "n1", "--no-check-script"}, c.env...), "train.py")
			code, _, errOut := runCLI(t, args...)
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, c.want)
			}
			if _, err := os.Lstat(filepath.Join(c.dir, "n1.sh")); err == nil {
				t.Errorf("n1.sh was written into %s", c.dir)
			}
		})
	}
	fresh := filepath.Join(base, "new", "od")
	if code, _, errOut := runCLI(t, "--output-dir", fresh, "--hosts", "n1", "--env", "HF_TOKEN=hf_x", "--no-check-script", "train.py"); code != 0 {
		t.Fatalf("new directory: exit %d: %s", code, errOut)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the new --output-dir: %v, %v; want mode 0700", st, err)
	}
	if st, err := os.Stat(filepath.Join(fresh, "n1.sh")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("n1.sh: %v, %v; want mode 0700", st, err)
	}
}

// TestOutputDirEmpty (issue 31, item 4): --output-dir "" (an unset
// variable) is bad input, not a launch.
func TestOutputDirEmpty(t *testing.T) {
	launched := false
	code, _, errOut := runCLIWith(t, func(o *Options) {
		o.Launch = func(context.Context, *job.Job, *Options) error { launched = true; return nil }
	}, "--output-dir", "", "--hosts", "n1", "--no-check-script", "train.py")
	if code != 2 || !strings.Contains(errOut, `--output-dir "": want a directory name`) || launched {
		t.Errorf("exit %d, launched %v, stderr %q; want 2 and no launch", code, launched, errOut)
	}
}

// TestK8sOutputDirNeverFollowsLinks (issue 31, item 3): the Kubernetes
// manifests are held to the same rule as the scripts.
func TestK8sOutputDirNeverFollowsLinks(t *testing.T) {
	base := t.TempDir()
	od := filepath.Join(base, "od")
	os.Mkdir(od, 0o700)
	victim := filepath.Join(base, "victim.txt")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	first := filepath.Join(od, "00-service-llama.yaml")
	os.Symlink("../victim.txt", first)
	code, _, errOut := runCLI(t, k8sArgs(t, "--output-dir", od, "--k8s-image", "a:1")...)
	if code != 2 || !strings.Contains(errOut, first+" already there") {
		t.Errorf("exit %d, stderr %q; want 2 naming %s", code, errOut, first)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim.txt holds %q", b)
	}
	if ents, _ := os.ReadDir(od); len(ents) != 1 {
		t.Errorf("od holds %v; want only the planted link", ents)
	}
}

// The scripts --output-dir writes give their ranks run's --stop-grace
// between SIGTERM and SIGKILL (they used to keep 30 s whatever was given),
// rounded up to whole seconds, and torchrun's 30 s without one.
func TestOutputDirScriptsKeepTheStopGrace(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "G=${PIPETTE_STOP_GRACE_S:-30}\n"},
		{[]string{"--stop-grace", "90s"}, "G=${PIPETTE_STOP_GRACE_S:-90}\n"},
		{[]string{"--stop-grace", "1500ms"}, "G=${PIPETTE_STOP_GRACE_S:-2}\n"},
		{[]string{"--shutdown-timeout", "45"}, "G=${PIPETTE_STOP_GRACE_S:-45}\n"},
	} {
		od := filepath.Join(t.TempDir(), "od")
		args := append(append([]string{"--output-dir", od}, tc.flags...), "--hosts", "n1", "--no-check-script", "train.py")
		if code, _, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.flags, code, errOut)
		}
		b, err := os.ReadFile(filepath.Join(od, "n1.sh"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%q: n1.sh lacks %q", tc.flags, tc.want)
		}
	}
}

// What run's supervision does across hosts, and the preflight, are not in
// the scripts --output-dir writes: given, they are named in a warning
// (the scripts are still written); none given, no warning.
func TestOutputDirSaysWhatScriptsLack(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, nil},
		{[]string{"--max-restarts", "2", "--heartbeat-timeout", "10s", "--quiet-ranks", "1"},
			[]string{"warning: --max-restarts 2, --heartbeat-timeout 10s, --quiet-ranks: the scripts --output-dir writes run each host's ranks once"}},
		{[]string{"--preflight"}, []string{"warning: --preflight: the scripts --output-dir writes start the job without it; write the preflight's own with pipette-launch preflight"}},
	} {
		od := filepath.Join(t.TempDir(), "od")
		args := append(append([]string{"--output-dir", od}, tc.flags...), "--hosts", "n1", "--nproc-per-node", "2", "--no-check-script", "train.py")
		code, _, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", tc.flags, code, errOut)
		}
		if len(tc.want) == 0 && strings.Contains(errOut, "the scripts --output-dir writes") {
			t.Errorf("no such flag given: stderr %q", errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%q: stderr %q\nlacks %q", tc.flags, errOut, w)
			}
		}
		if _, err := os.Stat(filepath.Join(od, "n1.sh")); err != nil {
			t.Errorf("%q: n1.sh not written: %v", tc.flags, err)
		}
	}
}
