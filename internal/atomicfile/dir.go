package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DirError is a directory this project will not write into: why, and
// what to do instead.
type DirError struct {
	Path, Why, Fix string
}

func (e *DirError) Error() string {
	if e.Fix == "" {
		return e.Path + " " + e.Why
	}
	return e.Path + " " + e.Why + ": " + e.Fix
}

// OwnDir makes dir (mode 0700, parents too) when it is missing, and
// refuses it unless it is then a real directory (not a symlink, not a
// file) owned by this user that no other user can write: the files written
// there are created by name, and another user who can write the directory
// could plant a link or replace them. With private, no other user may read
// or search it either (the mode has no group or other bits): for files
// holding secrets. A directory it refuses is a *DirError. The job files
// directory on hosts is held to the ownership and no-link part of this
// rule by job.PrivateDirScript (it is always made fresh, mode 0700).
func OwnDir(dir string, private bool) error {
	if dir == "" {
		return &DirError{Path: `""`, Why: "is no directory name", Fix: "give one"}
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// MkdirAll's mode is narrowed by the umask, never widened: at most 0700.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &DirError{Path: dir, Why: "is a symbolic link", Fix: "give the directory itself"}
	case !fi.IsDir():
		return &DirError{Path: dir, Why: "is a file, not a directory", Fix: "give a directory, or a new path (it is made mode 0700)"}
	case !ok || int(st.Uid) != os.Geteuid():
		return &DirError{Path: dir, Why: fmt.Sprintf("belongs to another user (uid %d)", st.Uid), Fix: "give a directory of your own"}
	case fi.Mode().Perm()&0o022 != 0:
		return &DirError{Path: dir, Why: fmt.Sprintf("can be written by other users (mode %04o)", fi.Mode().Perm()), Fix: "give a directory only you can write (chmod go-w), or a new one"}
	case private && fi.Mode().Perm()&0o077 != 0:
		return &DirError{Path: dir, Why: fmt.Sprintf("can be read by other users (mode %04o) and the files would hold secrets", fi.Mode().Perm()), Fix: "chmod 700 it, or give a new directory (made mode 0700)"}
	}
	return nil
}

// ExistsError is the files CreateAll would not replace.
type ExistsError struct{ Paths []string }

func (e *ExistsError) Error() string {
	return strings.Join(e.Paths, ", ") + " already there"
}

// File is one file for CreateAll: Name is relative to the directory,
// slash-separated; Perm is its exact mode.
type File struct {
	Name string
	Data []byte
	Perm fs.FileMode
}

// CreateAll writes files under dir, which OwnDir accepted. Without
// replace, it first checks that none of the names is there (as a file, a
// link, dangling or not, or anything else) and refuses, writing nothing,
// with an *ExistsError listing them; each is then created with
// O_EXCL|O_NOFOLLOW, so one planted meanwhile is refused too. With
// replace, each new file, complete, is renamed over the name itself (a
// link there is replaced, its target untouched). Never through a link: not
// at a name, not in a parent (each must be a real directory, made 0700
// when missing), and nothing leaves dir (os.Root).
func CreateAll(dir string, files []File, replace bool) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("write into %s: %w", dir, err)
	}
	defer root.Close()
	if !replace {
		var there []string
		for _, f := range files {
			if _, err := root.Lstat(f.Name); err == nil {
				there = append(there, filepath.Join(dir, filepath.FromSlash(f.Name)))
			}
		}
		if len(there) > 0 {
			return &ExistsError{Paths: there}
		}
	}
	for _, f := range files {
		if err := createIn(root, dir, f, replace); err != nil {
			return err
		}
	}
	return nil
}

func createIn(root *os.Root, dir string, f File, replace bool) error {
	full := filepath.Join(dir, filepath.FromSlash(f.Name))
	if err := mkdirsIn(root, dir, f.Name); err != nil {
		return err
	}
	if !replace {
		err := writeNew(root, f.Name, f.Data, f.Perm)
		if errors.Is(err, fs.ErrExist) {
			return &ExistsError{Paths: []string{full}}
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", full, err)
		}
		return nil
	}
	b := make([]byte, 8)
	rand.Read(b)
	parent, base := "", f.Name
	if i := strings.LastIndexByte(f.Name, '/'); i >= 0 {
		parent, base = f.Name[:i+1], f.Name[i+1:]
	}
	tmp := parent + "." + base + ".tmp-" + hex.EncodeToString(b)
	if err := writeNew(root, tmp, f.Data, f.Perm); err != nil {
		return fmt.Errorf("write %s: %w", full, err)
	}
	if err := root.Rename(tmp, f.Name); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", full, err)
	}
	return nil
}

// writeNew creates name, which must not exist (not even as a dangling
// link), writes data, sets perm exactly and syncs; on failure the file is
// removed.
func writeNew(root *os.Root, name string, data []byte, perm fs.FileMode) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Chmod(perm), f.Sync(), f.Close()); err != nil {
		root.Remove(name)
		return err
	}
	return nil
}

// mkdirsIn makes name's parent directories under root (mode 0700), each a
// real directory, not a link.
func mkdirsIn(root *os.Root, dir, name string) error {
	parts := strings.Split(name, "/")
	for i := 1; i < len(parts); i++ {
		p := strings.Join(parts[:i], "/")
		if err := root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, p), err)
		}
		fi, err := root.Lstat(p)
		if err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, p), err)
		}
		if !fi.IsDir() {
			return &DirError{Path: filepath.Join(dir, filepath.FromSlash(p)), Why: "is not a directory (a link or a file is there)", Fix: "remove it, or give another directory"}
		}
	}
	return nil
}
