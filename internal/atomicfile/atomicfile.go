// Package atomicfile writes a file so that a reader sees either its old
// content or the new, never a part: the one way this project replaces a
// file (caches, a calibrated cluster file, a job's local files, test-bed
// state). It is also the one way files are created in a directory of
// names this project chooses (--output-dir): in a directory of this user's
// that nobody else can write (OwnDir), never through a link and never over
// a file that is there unless asked (CreateAll).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data, mode perm (exactly: the umask does not
// narrow it, so a caller gets the mode it names). The data goes to a temp
// file in the same directory, which is synced to disk before it is renamed
// over path, so a crash leaves the old file or the new one, not an empty
// one. On any failure the temp file is removed and path is untouched. The
// directory must exist.
func Write(path string, data []byte, perm fs.FileMode) error {
	return write(path, data, perm, nil)
}

// WriteThrough is Write for a file the user named, which may be a symlink:
// the link stays and the file it leads to gets the data, keeping that
// file's mode (a 0600 file stays 0600) and, where this user may set them,
// its owner and group. A path that does not exist yet is created with
// perm. Anything but a regular file at the end of the links is refused.
func WriteThrough(path string, data []byte, perm fs.FileMode) error {
	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(path); lerr == nil {
			return fmt.Errorf("write %s: a symbolic link to a file that does not exist", path)
		}
		return write(path, data, perm, nil)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("write %s: %s is not a regular file", path, target)
	}
	return write(target, data, fi.Mode().Perm(), fi)
}

// write is Write; like, when set, is the file replaced, whose owner and
// group the new one takes where the system allows (best effort: a user
// may not give a file away, and the mode is what keeps it private).
func write(path string, data []byte, perm fs.FileMode, like fs.FileInfo) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if st, ok := sysStat(like); ok {
		tmp.Chown(int(st.Uid), int(st.Gid))
	}
	_, werr := tmp.Write(data)
	err = errors.Join(werr, tmp.Chmod(perm), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	// The rename is durable once the directory is synced; a directory that
	// cannot be opened or synced (some file systems) leaves the new file in
	// place all the same, so this is best effort.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func sysStat(fi fs.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}
