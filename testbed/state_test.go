package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A test-bed just torn down must not lend its index, and so its netns, link
// and state directory names, to the next one at once: CI went red when
// another package's test-bed took index 1 between Down and the check that
// instance 1 was gone. allocate goes round the indices, wrapping after the
// last; the root lock keeps two allocations apart.
func TestAllocateGoesRoundTheIndices(t *testing.T) {
	root := t.TempDir() // allocate makes directories only; nothing is brought up
	spec := Spec{Name: "alloc", StateRoot: root, Hosts: []HostSpec{{Name: "a"}}}
	alloc := func() *state {
		t.Helper()
		s, err := allocate(spec)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := alloc()
	if err := os.RemoveAll(first.dir); err != nil { // what Down leaves
		t.Fatal(err)
	}
	if second := alloc(); second.Index == first.Index {
		t.Errorf("index %d handed out again right after it was freed", first.Index)
	}
	for _, tc := range []struct {
		next, want int
	}{
		{maxIndex, maxIndex},
		{maxIndex + 1, minIndex}, // written after maxIndex: wrap
		{0, minIndex},            // out of range: start over
	} {
		if err := os.WriteFile(filepath.Join(root, nextIndexFile), []byte(strconv.Itoa(tc.next)), 0o600); err != nil {
			t.Fatal(err)
		}
		os.RemoveAll(filepath.Join(root, strconv.Itoa(tc.want)))
		if got := alloc(); got.Index != tc.want {
			t.Errorf("next %d: allocated %d, want %d", tc.next, got.Index, tc.want)
		}
	}
}
