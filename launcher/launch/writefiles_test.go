package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestWriteFilesLocalKeepsTheLaunchDirectory (issue 21): a local launch
// writes the job's files into its private files directory, where the
// ranks' argv names them, and never into the launch directory: the user's
// own ds_config.json and hostfile there stay as they were, and nothing is
// added beside them.
func TestWriteFilesLocalKeepsTheLaunchDirectory(t *testing.T) {
	for _, filesDir := range []string{".pipette-launch/jobs/j1", "abs"} {
		work := t.TempDir()
		fd := filesDir
		if fd == "abs" {
			fd = filepath.Join(t.TempDir(), "jobs", "j1")
		}
		mine := []byte(`{"train_batch_size": "auto"}`)
		if err := os.WriteFile(filepath.Join(work, "ds_config.json"), mine, 0o644); err != nil {
			t.Fatal(err)
		}
		j := job.Job{Name: "j1", WorkDir: work, FilesDir: fd, Files: []job.File{
			{Path: "ds_config.json", Mode: 0o644, Content: []byte(`{"train_batch_size": 8}`)},
			{Path: "hostfile", Mode: 0o644, Content: []byte("localhost slots=2\n")},
		}}
		if err := writeFilesLocal(j); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(filepath.Join(work, "ds_config.json")); string(got) != string(mine) {
			t.Errorf("%s: the user's ds_config.json became %q", filesDir, got)
		}
		if _, err := os.Stat(filepath.Join(work, "hostfile")); err == nil {
			t.Errorf("%s: a hostfile was written into the launch directory", filesDir)
		}
		for _, f := range j.Files {
			dst := filepath.FromSlash(remoteFilePath(j, f))
			got, err := os.ReadFile(dst)
			if err != nil || string(got) != string(f.Content) {
				t.Errorf("%s: %s at %s: %q, %v; want the job's file where the ranks read it", filesDir, f.Path, dst, got, err)
			}
			if st, err := os.Stat(filepath.Dir(dst)); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("%s: files directory %s: %v, %v; want private (0700)", filesDir, filepath.Dir(dst), st, err)
			}
		}
	}
}

// TestWriteFilesLocalRefusesForeignDirectory: on a shared /tmp the job's
// files directory may already exist as a symlink or another user's
// directory; a local launch refuses it, writing nothing there.
func TestWriteFilesLocalRefusesForeignDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (it gives a directory to another user); CI runs it as root")
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"symlink", func(t *testing.T, dir string) {
			if err := os.Symlink(t.TempDir(), dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"another user's", func(t *testing.T, dir string) {
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pipette-launch-j1")
			tc.setup(t, dir)
			j := job.Job{Name: "j1", WorkDir: t.TempDir(), FilesDir: dir, Files: []job.File{{Path: "hostfile", Mode: 0o644, Content: []byte("localhost slots=2\n")}}}
			err := writeFilesLocal(j)
			if err == nil || !strings.Contains(err.Error(), "is not a directory of this user") {
				t.Fatalf("writeFilesLocal into %s: %v; want a refusal", tc.name, err)
			}
			if _, err := os.Stat(filepath.Join(dir, "hostfile")); err == nil {
				t.Errorf("the hostfile was written into %s", tc.name)
			}
		})
	}
}
