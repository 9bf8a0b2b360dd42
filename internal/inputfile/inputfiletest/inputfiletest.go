// Package inputfiletest makes the inputs internal/inputfile refuses, for
// the tests of inputfile and of every command that reads an input file
// (tests only): a FIFO, which would hang an open; a directory; /dev/zero,
// which would fill memory; a sparse file over a limit, which takes no
// disk. Within bounds a check that could block on one of them.
package inputfiletest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// NotRegular is an input that is no regular file.
type NotRegular struct {
	Name string // for a subtest: "fifo", "directory", "dev-zero"
	Path string
	Kind string // as inputfile names it: "a named pipe (FIFO)", ...
}

// NotRegulars makes a FIFO and a directory in a fresh directory and
// returns them with /dev/zero.
func NotRegulars(t testing.TB) []NotRegular {
	t.Helper()
	dir := t.TempDir()
	sub := filepath.Join(dir, "adir")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	return []NotRegular{
		{"fifo", FIFO(t, dir, "fifo.json"), "a named pipe (FIFO)"},
		{"directory", sub, "a directory"},
		{"dev-zero", "/dev/zero", "a character device"},
	}
}

// FIFO makes a named pipe called name in dir: opened for reading the
// usual way, it waits for a writer that never comes.
func FIFO(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Sparse makes a file called name in dir of size bytes that uses no disk:
// a file over a limit, however large the limit.
func Sparse(t testing.TB, dir, name string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

// Within runs f and fails t if it has not returned after d: reading one
// of these inputs the wrong way blocks (a FIFO) or runs on (/dev/zero),
// and a test must say so rather than hang. f runs in a goroutine of its
// own: it must report through its results, not t.Fatal.
func Within(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still running after %s", what, d)
	}
}
