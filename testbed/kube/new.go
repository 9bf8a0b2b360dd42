package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// New starts a stack for a test and removes it when the test ends. It
// waits up to 20 minutes for another package's stack (one per machine).
// A missing binary or tool fails the test with what to run; it never
// skips. Its scripts' output goes to the test log only on failure.
func New(t testing.TB, mode Mode) *Stack {
	t.Helper()
	if m := missingFor(mode); len(m) > 0 {
		t.Fatalf("kubernetes test-bed: %s not built in %s: run `make deps` (or `pipette-testbed build --kubernetes`; `make test` runs it) first",
			strings.Join(m, ", "), BinDir())
	}
	if os.Geteuid() != 0 {
		t.Fatalf("kubernetes test-bed needs root (it runs in CI as root)")
	}
	var log strings.Builder
	dir := filepath.Join(TestStateRoot, strings.ReplaceAll(t.Name(), "/", "_"))
	s, err := Up(context.Background(), Options{Mode: mode, Dir: dir, Log: &log, Wait: 20 * time.Minute})
	if err != nil {
		t.Fatalf("kubernetes test-bed up: %v\n%s", err, log.String())
	}
	t.Cleanup(func() {
		if err := s.Down(context.Background()); err != nil {
			t.Errorf("kubernetes test-bed down: %v\n%s", err, log.String())
		}
		if t.Failed() {
			t.Logf("kubernetes test-bed log:\n%s", log.String())
		}
	})
	return s
}
