// Package inputfile opens and reads the files a user names as inputs
// (cluster, model and DeepSpeed config files, env files, hostfiles,
// Kubernetes options, plans, logs, tokenizer files): the one way the
// project does so. A file is opened without blocking and checked with
// fstat, so a FIFO, a device or a directory is refused by name before a
// byte is read (a FIFO would hang the open, /dev/zero would fill memory),
// and it is read through a bound, so a file over the limit is refused by
// name and limit after limit+1 bytes, not after all of it.
package inputfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// NotRegularError is an input that is not a regular file.
type NotRegularError struct {
	Path string
	Kind string // "a directory", "a named pipe (FIFO)", ...
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file: give the path of a file", e.Path, e.Kind)
}

// TooLargeError is an input over its limit.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the limit for this input: give the file it should be (a file this size is not one)", e.Path, Size(e.Limit))
}

// Size writes a limit in the largest whole binary unit (64 MiB, 4 KiB).
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Open opens path for reading if it is a regular file (symlinks to one
// are followed: the user named it). O_NONBLOCK makes opening a FIFO return
// at once, so the fstat check can refuse it instead of waiting for a
// writer that never comes; a regular file ignores the flag.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &NotRegularError{Path: path, Kind: kind(st.Mode())}
	}
	return f, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a file of type " + m.Type().String()
}

// Read returns the content of the regular file path, at most limit bytes;
// a larger file is a *TooLargeError, found from its size or after reading
// limit+1 bytes, whichever comes first.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// A file whose size already says it is over is refused unread; the
	// bounded read still catches one that grows, or says 0 (/proc).
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return ReadFrom(f, path, limit)
}

// ReadFrom reads r to its end, at most limit bytes; name is the input as
// the error names it.
func ReadFrom(r io.Reader, name string, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: name, Limit: limit}
	}
	return data, nil
}
