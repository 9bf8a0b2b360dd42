package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/inputfile/inputfiletest"
)

// TestReadRefusesWhatIsNotARegularFile: a directory, a FIFO (which must
// not hang the open) and a device are refused by name and kind before a
// byte is read; a symlink to a regular file is read.
func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(reg, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	ins := append(inputfiletest.NotRegulars(t), inputfiletest.NotRegular{Name: "dev-null", Path: "/dev/null", Kind: "a character device"})
	for _, c := range ins {
		var err error
		inputfiletest.Within(t, 5*time.Second, "Read("+c.Path+")", func() { _, err = Read(c.Path, 1<<20) })
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != c.Kind || !strings.Contains(err.Error(), c.Path) {
			t.Errorf("Read(%s) = %v; want a NotRegularError naming it as %s", c.Path, err, c.Kind)
		}
	}
	if b, err := Read(link, 1<<20); err != nil || string(b) != "a: 1\n" {
		t.Errorf("Read(symlink to a file) = %q, %v", b, err)
	}
}

// TestReadBound: a file of exactly the limit is read; one byte more is
// refused naming the file and the limit.
func TestReadBound(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(p, 2048); err != nil || len(b) != 2048 {
		t.Errorf("Read at the limit = %d bytes, %v", len(b), err)
	}
	_, err := Read(p, 2047)
	var tl *TooLargeError
	if !errors.As(err, &tl) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "2047 bytes") {
		t.Errorf("Read over the limit = %v; want a TooLargeError naming %s and 2047 bytes", err, p)
	}
	if _, err := Read(p, 1024); err == nil || !strings.Contains(err.Error(), "1 KiB") {
		t.Errorf("Read over a 1 KiB limit = %v; want the limit as 1 KiB", err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 20: "64 MiB", 1 << 30: "1 GiB", 4096: "4 KiB", 1000: "1000 bytes", 3<<20 + 1: "3145729 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q; want %q", n, got, want)
		}
	}
}

// endless is /dev/zero as a stream: no size to look at.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReadFromEndless: a source without end is refused after limit+1
// bytes, by name.
func TestReadFromEndless(t *testing.T) {
	_, err := ReadFrom(endless{}, "stream", 4096)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Path != "stream" || tl.Limit != 4096 {
		t.Errorf("ReadFrom(endless) = %v; want a TooLargeError for stream at 4 KiB", err)
	}
}
