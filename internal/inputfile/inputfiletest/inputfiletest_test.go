package inputfiletest

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The inputs are what their names say, the sparse file takes no disk, and
// Within fails a check that blocks.
func TestInputs(t *testing.T) {
	for _, in := range NotRegulars(t) {
		fi, err := os.Stat(in.Path)
		if err != nil || fi.Mode().IsRegular() {
			t.Errorf("%s %s: %v, %v; want something that is no regular file", in.Name, in.Path, fi, err)
		}
	}
	p := Sparse(t, t.TempDir(), "big.json", 64<<20+1)
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 64<<20+1 {
		t.Fatalf("sparse file: %v, %v; want 64 MiB + 1 byte", fi, err)
	}
	if used := diskBytes(fi); used >= 1<<20 {
		t.Errorf("sparse file uses %d bytes of disk; want none", used)
	}
	ft := &fakeT{TB: t}
	block := make(chan struct{})
	defer close(block)
	func() {
		defer func() { recover() }() // fakeT's Fatalf ends the call like t.Fatal
		Within(ft, 10*time.Millisecond, "read", func() { <-block })
	}()
	if !strings.Contains(ft.msg, "read: still running after 10ms") {
		t.Errorf("Within on a blocked check said %q; want it named as still running", ft.msg)
	}
}

type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic("fatal")
}

// diskBytes is how much disk fi's file takes.
func diskBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}
