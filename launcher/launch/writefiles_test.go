package launch

import (
	"os"
	"path/filepath"
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
