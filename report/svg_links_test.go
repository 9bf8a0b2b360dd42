package report

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteSVGsNeverFollowsLinks (issue 31): a link planted at a figure's
// name is replaced by the figure; what it pointed to is untouched.
func TestWriteSVGsNeverFollowsLinks(t *testing.T) {
	_, r := exampleReport(t)
	base := t.TempDir()
	dir := filepath.Join(base, "figs")
	os.Mkdir(dir, 0o700)
	victim := filepath.Join(base, "victim.txt")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	first := filepath.Join(dir, r.Figures()[0].Name+".svg")
	os.Symlink("../victim.txt", first)
	if _, err := r.WriteSVGs(dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim.txt holds %.40q", b)
	}
	if fi, err := os.Lstat(first); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("%s: %v, %v; want the figure as a regular file", first, fi, err)
	}
}
