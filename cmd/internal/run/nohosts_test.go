package run

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestNoHostsRunsHere (issue 21): a line that names no hosts runs on this
// machine as its own launcher would (torchrun: --nproc-per-node, default 1;
// DeepSpeed's launcher: every GPU), launched and dry-run alike; the
// embedded example cluster is only planned on when asked for; several
// nodes and no hosts is refused naming --hosts.
func TestNoHostsRunsHere(t *testing.T) {
	fakeGPUs(t, 4)
	t.Setenv("CUDA_VISIBLE_DEVICES", "") // restored after the test
	os.Unsetenv("CUDA_VISIBLE_DEVICES")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		hosts    int
		ranks    int
		want     string // in stdout+stderr
		launched bool
	}{
		{"torchrun one node, launched", []string{"--nproc_per_node", "8", "--nnodes", "1", "train.py"}, 0, 1, 8, "no hosts named: this machine, as torchrun", true},
		{"torchrun one node, dry run", []string{"--dry-run", "--nproc_per_node", "8", "--nnodes", "1", "train.py"}, 0, 0, 0, "# job pipette: 8 ranks on 1 host", false},
		{"torchrun default one rank", []string{"--dry-run", "train.py"}, 0, 0, 0, "# job pipette: 1 ranks on 1 host", false},
		{"dry run runs here", []string{"--dry-run", "--nproc_per_node", "2", "train.py"}, 0, 0, 0, "runs on this machine without SSH", false},
		{"deepspeed every GPU", []string{"--dry-run", "train.py", "--deepspeed"}, 0, 0, 0, "# job pipette: 4 ranks on 1 host", false},
		{"deepspeed every GPU, launched", []string{"train.py", "--deepspeed"}, 0, 1, 4, "this machine with its 4 GPUs, as DeepSpeed's launcher", true},
		{"deepspeed --num_gpus", []string{"--dry-run", "--num_gpus", "2", "train.py", "--deepspeed"}, 0, 0, 0, "# job pipette: 2 ranks on 1 host", false},
		{"several nodes, no hosts", []string{"--nnodes", "2", "--nproc_per_node", "8", "train.py"}, 2, 0, 0, "--nnodes 2 but no hosts are named", false},
		{"example asked for", []string{"--dry-run", "--cluster", "example", "--nproc_per_node", "8", "train.py"}, 0, 0, 0, "dry run on the embedded example cluster", false},
		{"example never launched", []string{"--cluster", "example", "train.py"}, 2, 0, 0, "only for --dry-run and plan", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got *job.Job
			var local bool
			f := &fakes{probe: noProbe, launch: func(_ context.Context, j *job.Job, o *Options) error {
				got, local = j, o.local
				return nil
			}}
			code, out, errOut := runCLIWith(t, f.adjust, append([]string{"--no-check-script"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Fatalf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.want, out, errOut)
			}
			if tc.launched != (got != nil) {
				t.Fatalf("launched: %v, want %v", got != nil, tc.launched)
			}
			if got == nil {
				return
			}
			n := 0
			for _, h := range got.Hosts {
				n += len(h.Ranks)
			}
			if len(got.Hosts) != tc.hosts || n != tc.ranks || !local {
				t.Errorf("%d hosts, %d ranks, local %v; want %d, %d, local", len(got.Hosts), n, local, tc.hosts, tc.ranks)
			}
		})
	}
}

// TestHostfileDevNull (issue 21): DeepSpeedExamples' BingBertSquad passes
// --hostfile /dev/null; DeepSpeed's launcher takes a hostfile that is no
// regular file as "this machine only" (fetch_hostfile), so does this one.
func TestHostfileDevNull(t *testing.T) {
	fakeGPUs(t, 4)
	code, out, errOut := runCLI(t, "--dry-run", "--no-check-script", "--num_nodes", "1", "--num_gpus", "4", "--hostfile", "/dev/null", "train.py", "--deepspeed")
	if code != 0 || !strings.Contains(out, "# job pipette: 4 ranks on 1 host") || !strings.Contains(out, "is not a regular file: this machine only") {
		t.Errorf("exit %d\nstderr: %s\nstdout: %.400s", code, errOut, out)
	}
}

// TestDeepSpeedDefaultHostfile: a DeepSpeed line that names no hosts reads
// DeepSpeed's default hostfile (Options.DeepSpeedHostfile: /job/hostfile,
// or $PIPETTE_DEEPSPEED_HOSTFILE) when it exists; a torchrun line never
// does. The test never reads or writes the real /job.
func TestDeepSpeedDefaultHostfile(t *testing.T) {
	fakeGPUs(t, 4)
	hf := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(hf, []byte("worker-0 slots=2\nworker-1 slots=2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := []string{"train.py", "--deepspeed"}
	for _, tc := range []struct {
		name     string
		hostfile string // Options.DeepSpeedHostfile; "env": from the environment
		args     []string
		want     string
	}{
		{"option", hf, ds, "# job pipette: 4 ranks on 2 hosts"},
		{"environment", "env", ds, "# job pipette: 4 ranks on 2 hosts"},
		{"absent", hf + ".absent", ds, "# job pipette: 4 ranks on 1 host"},
		{"torchrun line", hf, append([]string{"--nproc_per_node", "2"}, ds...), "# job pipette: 2 ranks on 1 host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.hostfile == "env" {
				t.Setenv(launchline.DeepSpeedHostfileEnv, hf)
			}
			app := func(io *cmdutil.IOStreams) *cli.App {
				r := NewCmd(io, func(o *Options) {
					o.NewJobID = cmdtest.JobID
					if tc.hostfile != "env" {
						o.DeepSpeedHostfile = tc.hostfile
					}
				})
				return cmdutil.NewApp(io, r, r)
			}
			code, out, errOut := cmdtest.Run(app, append([]string{"--dry-run", "--no-check-script"}, tc.args...)...)
			if code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want 0 and %q\nstderr: %s\nstdout: %.400s", code, tc.want, errOut, out)
			}
		})
	}
}
