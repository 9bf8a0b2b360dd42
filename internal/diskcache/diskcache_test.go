package diskcache

import (
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	Hosts []string `json:"hosts"`
}

// TestSaveLoad: an entry comes back under its key only; the directory and
// file are private; a corrupt entry is a miss; nothing but the entry is
// left in the directory.
func TestSaveLoad(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "cache"))
	if err := d.Save("measure", "a\x00b", entry{Hosts: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	var got entry
	if !d.Load("measure", "a\x00b", &got) || len(got.Hosts) != 2 || got.Hosts[1] != "b" {
		t.Fatalf("Load = %+v", got)
	}
	if d.Load("measure", "a\x00c", &got) || d.Load("launch", "a\x00b", &got) {
		t.Errorf("another key or kind must be a miss")
	}
	if st, err := os.Stat(string(d)); err != nil || st.Mode().Perm() != DirMode {
		t.Errorf("directory mode %v, %v; want %v", st.Mode().Perm(), err, DirMode)
	}
	p := d.Path("measure", "a\x00b")
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != FileMode {
		t.Errorf("entry mode %v, %v; want %v", st.Mode().Perm(), err, FileMode)
	}
	if ents, _ := os.ReadDir(string(d)); len(ents) != 1 {
		t.Errorf("cache holds %v; want one entry and no temp file", ents)
	}
	if err := os.WriteFile(p, []byte("{not json"), FileMode); err != nil {
		t.Fatal(err)
	}
	if d.Load("measure", "a\x00b", &got) {
		t.Errorf("a corrupt entry must be a miss")
	}
}

// TestSaveFailureLeavesNoTemp: a Save whose rename fails (the entry's path
// is a directory) returns an error and leaves no temp file behind.
func TestSaveFailureLeavesNoTemp(t *testing.T) {
	d := Dir(t.TempDir())
	p := d.Path("launch", "k")
	if err := os.MkdirAll(filepath.Join(p, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := d.Save("launch", "k", entry{}); err == nil {
		t.Fatal("Save over a directory succeeded")
	}
	if ents, _ := os.ReadDir(string(d)); len(ents) != 1 {
		t.Errorf("cache holds %v; want only the blocking directory", ents)
	}
}
