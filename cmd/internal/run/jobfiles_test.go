package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// autoDSConfig is a user's own ds_config.json that leaves the micro-batch
// to the launcher ("auto"), so a launch must write a filled-in copy.
const autoDSConfig = `{
  "train_batch_size": 64,
  "gradient_accumulation_steps": 4,
  "train_micro_batch_size_per_gpu": "auto",
  "bf16": {"enabled": true}
}
`

// TestGeneratedFilesGoToAPrivateDirectory: a user's own ds_config.json in
// the launch directory (the file DeepSpeed's docs name) is read where it
// is and never overwritten: the filled-in copy and the hostfile go to the
// job's own directory, which the ranks' argv names; --output-dir writes
// them into that directory (its absolute path in the scripts) and refuses
// to overwrite the user's config there.
func TestGeneratedFilesGoToAPrivateDirectory(t *testing.T) {
	dir := t.TempDir()
	user := filepath.Join(dir, "ds_config.json")
	for name, data := range map[string]string{"ds_config.json": autoDSConfig, "train.py": "print('hi')\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got *job.Job
	f := &fakes{probe: noProbe, launch: func(_ context.Context, job *job.Job, _ *Options) error { got = job; return nil }}
	args := []string{"--hosts", "w1,w2", "--nproc-per-node", "8", "train.py", "--deepspeed", "--deepspeed_config", "ds_config.json"}
	code, _, errOut := runCLIAtWith(t, f.adjust, dir, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got == nil || len(got.Files) != 2 {
		t.Fatalf("launchJob got %+v", got)
	}
	want := "/tmp/pipette-launch-pipette-ID"
	if got.FilesDir != want {
		t.Errorf("files directory %q, want %q", got.FilesDir, want)
	}
	for _, f := range got.Files {
		p := got.FilePath(f)
		if !strings.HasPrefix(p, want+"/") {
			t.Errorf("%s lands at %s (work directory %s), not in the job's own directory", f.Path, p, got.WorkDir)
		}
	}
	argv := strings.Join(got.Hosts[1].Ranks[3].Argv, " ")
	if !strings.Contains(argv, "--deepspeed_config "+want+"/ds_config.json") {
		t.Errorf("the ranks' argv does not name the filled-in copy: %s", argv)
	}
	if b, _ := os.ReadFile(user); string(b) != autoDSConfig {
		t.Errorf("the user's ds_config.json changed:\n%s", b)
	}

	// --output-dir: the files next to the scripts; the argv names them there.
	out := filepath.Join(t.TempDir(), "launch")
	code, stdout, errOut := runCLIAt(t, dir, append([]string{"--output-dir", out}, args...)...)
	if code != 0 {
		t.Fatalf("--output-dir: exit %d: %s", code, errOut)
	}
	script, err := os.ReadFile(filepath.Join(out, "w2.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "--deepspeed_config "+out+"/ds_config.json") {
		t.Errorf("the script does not name %s/ds_config.json:\n%s", out, script)
	}
	if st, err := os.Stat(filepath.Join(out, "w2.sh")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("w2.sh: %v, mode %v; want 0700 (it holds the ranks' environment)", err, st.Mode().Perm())
	}
	if !strings.Contains(stdout, "the ranks read the job's files from "+out) {
		t.Errorf("--output-dir does not say where the files must be:\n%s", stdout)
	}
	// --output-dir . in the launch directory would replace the user's file.
	code, _, errOut = runCLIAt(t, dir, append([]string{"--output-dir", "."}, args...)...)
	if code != 2 || !strings.Contains(errOut, "would overwrite your --deepspeed_config ds_config.json") {
		t.Errorf("--output-dir .: exit %d, %s; want 2 naming the user's config", code, errOut)
	}
	if b, _ := os.ReadFile(user); string(b) != autoDSConfig {
		t.Errorf("the user's ds_config.json changed:\n%s", b)
	}
}

// TestJobIDsDiffer: two launches of one job name never share a files
// directory.
func TestJobIDsDiffer(t *testing.T) {
	t.Parallel()
	a, b := jobFilesDir(&Options{RunID: "pipette"}), jobFilesDir(&Options{RunID: "pipette"})
	if a == b || !strings.HasPrefix(a, "/tmp/pipette-launch-pipette-") {
		t.Errorf("files directories %q and %q: want two different ones, /tmp/pipette-launch-<job-id>", a, b)
	}
}

// runCLIAt runs the CLI in dir, with the test's clean environment.
func runCLIAt(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	return runCLIAtWith(t, nil, dir, args...)
}

// runCLIAtWith is runCLIAt with steps of the run replaced.
func runCLIAtWith(t *testing.T, adjust func(*Options), dir string, args ...string) (int, string, string) {
	t.Helper()
	t.Chdir(dir)
	cmdtest.CleanEnv(t)
	return cmdtest.Exec(testApp(adjust), append([]string{"pipette-launch"}, args...)...)
}
