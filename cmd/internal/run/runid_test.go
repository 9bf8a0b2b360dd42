package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A run id that cannot name the job everywhere it goes is refused where it
// is parsed (exit 2, naming the flag and its variable), before any file is
// written: a line break went raw into the comment heading every host
// script (the rest of the value ran as a command on every host), and a
// 300-byte id made a job directory name past the 255 bytes a file name
// may have.
func TestRunIDIsOneBoundedLine(t *testing.T) {
	for _, tc := range []struct {
		name, id, want string
		env            bool
	}{
		{"newline", "a\ntouch PWNED\n", "holds the control character '\\n'", false},
		{"newline in PET_RDZV_ID", "a\ntouch PWNED\n", "--run-id (or PET_RDZV_ID)", true},
		{"carriage return", "a\rb", "control character", false},
		{"escape", "a\x1b[2Jb", "control character", false},
		{"line separator", "a\u2028b", "control character", false},
		{"not UTF-8", "a\xffb", "not UTF-8", false},
		{"300 bytes", strings.Repeat("r", 300), "is 300 bytes long: want at most 128", false},
		{"blank", "  ", "want a non-empty job name", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "o")
			args := []string{"--output-dir", out, "--hosts", "n1", "--no-check-script"}
			if tc.env {
				t.Setenv("PET_RDZV_ID", tc.id)
			} else {
				args = append(args, "--run-id", tc.id)
			}
			code, stdout, stderr := runAppBuffers(append(args, "train.py")...)
			if code != 2 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--run-id") {
				t.Errorf("exit %d, want 2 naming --run-id and %q; stderr: %s\nstdout: %s", code, tc.want, stderr, stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("--output-dir %s was written for a refused run id", out)
			}
		})
	}
}

// A run id at the limit still makes a job directory name within 255 bytes.
func TestLongestRunIDFitsAFileName(t *testing.T) {
	t.Parallel()
	dir := filepath.Base(jobFilesDir(&Options{RunID: strings.Repeat("r", 128)}))
	if len(dir) > 255 {
		t.Errorf("job directory %s is %d bytes long", dir, len(dir))
	}
}
