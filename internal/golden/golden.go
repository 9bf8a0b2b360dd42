// Package golden compares rendered output with a golden file under a
// package's testdata, or rewrites the file when the test runs with -update.
// Only tests import it; each keeps its own -update flag.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares got with the file at path, or writes got there (creating
// its directory) when update is set.
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (rerun the test with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from golden file %s (rerun with -update if the change is intended)\n--- got ---\n%s", path, got)
	}
}
