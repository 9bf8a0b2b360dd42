package calibrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateWritesThroughLinkKeepingMode (issue 31, item 7): a cluster
// file given as a symlink stays a symlink and its target gets the
// calibration; a 0600 file stays 0600.
func TestCalibrateWritesThroughLinkKeepingMode(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real-cluster.yaml")
	link := filepath.Join(dir, "cluster.yaml")
	os.WriteFile(target, []byte(calibrateCluster), 0o600)
	os.Chmod(target, 0o600)
	os.Symlink("real-cluster.yaml", link)
	runPinned(t, dir, link)
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("cluster.yaml after calibrate: %v, %v; want the symlink kept", fi, err)
	}
	data, _ := os.ReadFile(target)
	if !strings.Contains(string(data), "calibration:") || !strings.HasPrefix(string(data), "# a hand-written cluster") {
		t.Errorf("the link's target lacks the calibration:\n%s", data)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o600 {
		t.Errorf("target mode %v; want 0600 kept", st.Mode().Perm())
	}
}
