package job

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivateDirScript runs the script with the real /bin/sh: a fresh
// directory is created 0700 (its new parents too); a symlink or another
// user's directory at the path is refused with the message naming it.
func TestPrivateDirScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it gives a directory to another user); CI runs it as root")
	}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string)
		refuse bool
	}{
		{"fresh", func(*testing.T, string) {}, false},
		{"mine already", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"symlink", func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"another user's", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "parent", "pipette-launch-j1")
			tc.setup(t, dir)
			out, err := exec.Command("/bin/sh", "-c", PrivateDirScript(dir)).CombinedOutput()
			if tc.refuse {
				if err == nil || !strings.Contains(string(out), dir+" is not a directory of this user") {
					t.Errorf("%s: %v, %q; want a refusal naming the directory", tc.name, err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v: %s", tc.name, err, out)
			}
			for _, d := range []string{dir, filepath.Dir(dir)} {
				if st, err := os.Lstat(d); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
					t.Errorf("%s: %s: %v, %v; want a private directory (0700)", tc.name, d, st, err)
				}
			}
		})
	}
}

// TestRemoveFilesDirScript runs the removal with the real /bin/sh: the
// job's own directory goes with everything in it; a symlink there (its
// target kept) and another user's directory stay; no script at all for a
// job without its own directory, for a top-level one, and for the work
// directory or one above it.
func TestRemoveFilesDirScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it gives a directory to another user); CI runs it as root")
	}
	files := []File{{Path: "ds_config.json", Content: []byte("{}")}}
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, dir string) (keep string) // keep: a path that must survive
		remove bool
	}{
		{"own", func(t *testing.T, dir string) string {
			mkdir(t, filepath.Join(dir, "site"), 0o700)
			write(t, filepath.Join(dir, "site", "sitecustomize.py"))
			return ""
		}, true},
		{"symlink", func(t *testing.T, dir string) string {
			target := t.TempDir()
			write(t, filepath.Join(target, "user-file"))
			mkdir(t, filepath.Dir(dir), 0o700)
			if err := os.Symlink(target, dir); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(target, "user-file")
		}, false},
		{"another user's", func(t *testing.T, dir string) string {
			mkdir(t, dir, 0o777)
			write(t, filepath.Join(dir, "theirs"))
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "theirs")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "parent", "pipette-launch-j1")
			keep := tc.setup(t, dir)
			j := Job{FilesDir: dir, WorkDir: t.TempDir(), Files: files}
			out, err := exec.Command("/bin/sh", "-c", j.RemoveFilesDirScript()).CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if _, err := os.Lstat(dir); tc.remove != os.IsNotExist(err) {
				t.Errorf("removed: %v, want %v", os.IsNotExist(err), tc.remove)
			}
			if _, err := os.Stat(keep); keep != "" && err != nil {
				t.Errorf("%s is gone: %v", keep, err)
			}
		})
	}
	for _, j := range []Job{
		{FilesDir: "/tmp/pipette-launch-j1", WorkDir: "/home/u/run"},
		{FilesDir: "/tmp", WorkDir: "/home/u/run", Files: files},
		{FilesDir: "/home/u/run", WorkDir: "/home/u/run", Files: files},
		{FilesDir: "/home/u", WorkDir: "/home/u/run", Files: files},
		{WorkDir: "/home/u/run", Files: files},
	} {
		if s := j.RemoveFilesDirScript(); s != "" {
			t.Errorf("files dir %q, work dir %q, %d files: removal script %q, want none", j.FilesDir, j.WorkDir, len(j.Files), s)
		}
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
