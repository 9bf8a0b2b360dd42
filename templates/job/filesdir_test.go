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
