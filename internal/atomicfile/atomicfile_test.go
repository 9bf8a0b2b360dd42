package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite: the file gets the data and exactly the mode asked for,
// replaces an older file, and no temp file is left behind.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, c := range []struct {
		data string
		perm os.FileMode
	}{{"first", 0o600}, {"second, longer", 0o755}} {
		if err := Write(p, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != c.data {
			t.Fatalf("read %q, %v; want %q", b, err, c.data)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != c.perm {
			t.Errorf("mode %v, %v; want %v", st.Mode().Perm(), err, c.perm)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v; want only f.json", ents)
	}
}

// TestWriteFailedRenameCleansUp: when the rename fails (path is a
// non-empty directory), the error names the path, the directory is left
// as it was and the temp file is gone.
func TestWriteFailedRenameCleansUp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(p, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := Write(p, []byte("x"), 0o600)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("Write over a directory = %v; want an error naming %s", err, p)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "taken" {
		t.Errorf("directory holds %v after a failed write; want only taken", ents)
	}
}

// TestWriteMissingDirectory: no directory is created on the caller's behalf.
func TestWriteMissingDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "f")
	if err := Write(p, []byte("x"), 0o600); err == nil {
		t.Fatalf("Write into a missing directory succeeded")
	}
}
