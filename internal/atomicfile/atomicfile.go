// Package atomicfile writes a file so that a reader sees either its old
// content or the new, never a part: the one way this project replaces a
// file (caches, a calibrated cluster file, a job's local files, test-bed
// state).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, mode perm (exactly: the umask does not
// narrow it, so a caller gets the mode it names). The data goes to a temp
// file in the same directory, which is synced to disk before it is renamed
// over path, so a crash leaves the old file or the new one, not an empty
// one. On any failure the temp file is removed and path is untouched. The
// directory must exist.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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
