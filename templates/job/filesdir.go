package job

import (
	"fmt"
	"path"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
)

// FilesRoot is the job's files directory on every host: FilesDir when
// absolute, else under WorkDir. Empty when the job has no files directory
// of its own (FilesDir empty: jobs built by hand write into WorkDir).
func (j *Job) FilesRoot() string {
	if j.FilesDir == "" {
		return ""
	}
	if path.IsAbs(j.FilesDir) {
		return path.Clean(j.FilesDir)
	}
	return path.Join(j.WorkDir, j.FilesDir)
}

// PrivateDirScript is a shell command that creates dir private (mode
// 0700, parents too) and refuses, exit 1 with a message on stderr, unless
// it is then a real directory owned by the user running it: on a shared
// /tmp another user could have created the path (or a symlink there)
// first, to read or replace the job's files.
func PrivateDirScript(dir string) string {
	q := shellquote.Quote(dir)
	msg := shellquote.Quote(fmt.Sprintf("pipette-launch: job files directory %s is not a directory of this user (a symlink, or created by another user): remove it or choose another with --output-dir", dir))
	return fmt.Sprintf(`(umask 077 && mkdir -p %[1]s) && [ -d %[1]s ] && [ -O %[1]s ] && [ ! -L %[1]s ] || { echo %[2]s >&2; exit 1; }`, q, msg)
}

// FilesDirScript is PrivateDirScript for the job's files directory
// (FilesRoot), or "" when the job has no files or no directory of its own.
func (j *Job) FilesDirScript() string {
	root := j.FilesRoot()
	if root == "" || len(j.Files) == 0 {
		return ""
	}
	return PrivateDirScript(root)
}

// RemoveFilesDirScript is a shell command that removes the job's files
// directory (FilesRoot) once the job is over, or "" when the job has none
// of its own (FilesDirScript is ""). It removes only what
// PrivateDirScript leaves: a real directory of the user running it, never
// a symlink or another user's path, and never a top-level directory or the
// work directory (or one above it), whatever FilesDir says.
func (j *Job) RemoveFilesDirScript() string {
	root := j.FilesRoot()
	if j.FilesDirScript() == "" || !path.IsAbs(root) || path.Dir(root) == "/" || root == "/" {
		return ""
	}
	if wd := path.Clean(j.WorkDir); wd == root || strings.HasPrefix(wd, root+"/") {
		return ""
	}
	return fmt.Sprintf(`if [ -d %[1]s ] && [ ! -L %[1]s ] && [ -O %[1]s ]; then rm -rf -- %[1]s; fi`, shellquote.Quote(root))
}
