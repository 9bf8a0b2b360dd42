package run

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/launchline"
	"github.com/pipette-launch/pipette-launch/internal/golden"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/templates"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/urfave/cli/v2"
)

// testdataDir is the commands' shared fixtures (absolute, so tests can
// change into it more than once); goldenDir is this package's own golden
// files.
var (
	testdataDir  = cmdtest.Testdata
	goldenDir, _ = filepath.Abs(filepath.Join("testdata", "golden"))
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// gpt48 is a Megatron argument list whose shape the planner reads.
var gpt48 = []string{"--num-layers", "48", "--hidden-size", "6144", "--num-attention-heads", "48",
	"--seq-length", "4096", "--max-position-embeddings", "4096", "--vocab-size", "32000",
	"--global-batch-size", "64", "--bf16", "--swiglu"}

var gpt13b = []string{"--num-layers", "40", "--hidden-size", "5120", "--num-attention-heads", "40",
	"--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "50257",
	"--global-batch-size", "32", "--bf16"}

// testApp builds the CLI with run as its only command (and the bare
// form); adjust, when not nil, replaces steps of the run (Options.Launch,
// ProbeLaunch). Job ids are stable (cmdtest.JobID).
func testApp(adjust func(*Options)) func(*cmdutil.IOStreams) *cli.App {
	return func(io *cmdutil.IOStreams) *cli.App {
		r := NewCmd(io, func(o *Options) {
			o.NewJobID = cmdtest.JobID
			// Never this machine's /job/hostfile (DeepSpeed's default).
			o.DeepSpeedHostfile = ""
			if adjust != nil {
				adjust(o)
			}
		})
		return cmdutil.NewApp(io, r, r)
	}
}

// runApp runs argv (argv[0] is the program) through testApp(nil).
func runApp(argv []string, io *cmdutil.IOStreams) int {
	return cmdutil.Execute(testApp(nil)(io), argv, io)
}

// runCLI runs the app in testdata with a fixed environment and returns
// the exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLIWith(t, nil, args...)
}

// runCLIWith is runCLI with steps of the run replaced (testApp).
func runCLIWith(t *testing.T, adjust func(*Options), args ...string) (int, string, string) {
	t.Helper()
	return cmdtest.RunInTestdata(t, testApp(adjust), args...)
}

// predictionRE matches the planner's predicted numbers, which change with
// its cost model; golden files pin what is rendered, not those figures.
var predictionRE = regexp.MustCompile(`predicted [0-9.]+ s/iteration, [0-9.]+ of [0-9.]+ GiB per GPU`)

func checkGolden(t *testing.T, name string, got string) {
	t.Helper()
	got = predictionRE.ReplaceAllString(got, "predicted (figures masked in golden files)")
	golden.Check(t, filepath.Join(goldenDir, name), []byte(got), *update)
}

func TestDryRunGolden(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"megatron_default_cluster", cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "pretrain_gpt.py"}, gpt48)},
		// --use-all-gpus: the plan on the H100s alone is faster, and this
		// golden shows both islands' hosts rendered.
		{"megatron_run_subcommand_mixed", cmdtest.Cat([]string{"run", "--dry-run", "--use-all-gpus", "--cluster", "mixed-ib-ethernet.yaml", "pretrain_gpt.py"}, gpt48)},
		{"megatron_offload_13b", cmdtest.Cat([]string{"--dry-run", "--cluster", "../../../examples/small-offload.yaml", "pretrain_gpt.py"}, gpt13b)},
		{"deepspeed_offload_13b", cmdtest.Cat([]string{"--dry-run", "--framework", "deepspeed", "--cluster", "../../../examples/small-offload.yaml", "pretrain_gpt.py"}, gpt13b)},
		{"deepspeed_plain_script_user_config", []string{"--dry-run", "--framework", "deepspeed", "--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "2", "--model", "llama3-8b", "--global-batch-size", "64", "train.py", "--deepspeed", "--deepspeed_config", "my_ds_config.json"}},
		{"torch_hostfile", []string{"--dry-run", "--hostfile", "hostfile", "--python", "/usr/bin/python3", "train.py", "--lr", "0.1", "--name", "it's a test"}},
		{"megatron_hosts_user_split", []string{"--dry-run", "--hosts", "gpu[01-02]", "--nproc-per-node", "4", "pretrain_gpt.py", "--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048", "--vocab-size", "50257", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "4", "--decoder-first-pipeline-num-layers", "3", "--decoder-last-pipeline-num-layers", "5", "--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "2", "--micro-batch-size", "1", "--global-batch-size", "16"}},
		{"torch_hosts_underscored", []string{"--dry-run", "--hosts", "node[1-2]", "--nproc_per_node=2", "--master_port", "29600", "-m", "mypkg.train", "--dry-run"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
			checkGolden(t, tc.name+".txt", out)
		})
	}
}

// TestFlagsStopAtTheScript: flags after the script are the script's, even
// ones that are also ours.
func TestFlagsStopAtTheScript(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--hosts", "n1", "--nproc-per-node", "1", "train.py", "--dry-run", "--nnodes", "5", "--cluster", "x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "python3 -u train.py --dry-run --nnodes 5 --cluster x\n") {
		t.Errorf("the script's arguments were not passed through unchanged:\n%s", out)
	}
}

func TestBadInputExitsTwo(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no script", []string{"--dry-run"}, "no training script given"},
		{"missing script", []string{"--hosts", "n1", "nothere.py"}, "script nothere.py not found here"},
		{"missing script, output dir", []string{"--output-dir", "/nonexistent-out", "--hosts", "n1", "nothere.py"}, "script nothere.py not found here"},
		{"no-python and module", []string{"--dry-run", "--no-python", "-m", "--hosts", "n1", "pkg"}, "cannot be used together"},
		{"cluster and hosts", []string{"--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--hosts", "n1", "train.py"}, "--cluster cannot be combined with --hosts"},
		{"hosts and hostfile", []string{"--dry-run", "--hosts", "n1", "--hostfile", "hostfile", "train.py"}, "give one"},
		{"impossible fixed TP", cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "pretrain_gpt.py", "--tensor-model-parallel-size", "5"}, gpt48), "--tensor-model-parallel-size 5 does not divide --num-attention-heads 48"},
		{"fixed TP larger than the cluster", cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "pretrain_gpt.py", "--tensor-model-parallel-size", "48"}, gpt48), "needs 48 GPUs"},
		{"global batch conflict", cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "--global-batch-size", "128", "pretrain_gpt.py"}, gpt48), "contradicts the script's --global-batch-size 64"},
		{"elastic MIN above hosts", []string{"--dry-run", "--nnodes", "2:4", "--hosts", "n1", "train.py"}, "--nnodes 2:4: MIN 2 is above the 1 hosts listed"},
		{"elastic MIN above MAX", []string{"--dry-run", "--nnodes", "4:2", "--hosts", "n[1-4]", "train.py"}, `--nnodes "4:2": MIN 4 is above MAX 2`},
		{"elastic MIN above cluster", []string{"--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "5:8", "train.py"}, "MIN 5 is above the 4 hosts in the cluster file"},
		{"unknown flag", []string{"--dry-run", "--nproc-per-nodes", "2", "train.py"}, "flag provided but not defined"},
		{"ambiguous prefix", []string{"--dry-run", "--no", "train.py"}, "flag provided but not defined: -no"},
		{"bad framework", []string{"--dry-run", "--framework", "jax", "train.py"}, "--framework \"jax\""},
		{"bad nccl mode", []string{"--dry-run", "--nccl-mode", "ib", "--hosts", "n1", "train.py"}, "--nccl-mode \"ib\""},
		{"missing cluster file", []string{"--dry-run", "--cluster", "nope.yaml", "train.py"}, "cluster file"},
		{"plan index", cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "--plan", "0", "pretrain_gpt.py"}, gpt48), "numbered from 1"},
		{"more ranks than GPUs", []string{"--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--nproc-per-node", "9", "train.py"}, "have 8 GPUs"},
		{"more nodes than hosts", []string{"--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "5", "train.py"}, "lists 4 hosts"},
		{"per-group for torch", []string{"--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--nccl-mode", "per-group", "train.py"}, "needs Holmes' Megatron fork"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q does not contain %q", errOut, tc.want)
			}
		})
	}
}

// noProbe stands in for the launch probe: nothing is known about the
// hosts, so no connection is made.
func noProbe(context.Context, []remote.HostTarget, int, string, *Options) (*launchprobe.Result, *remote.Pool, error) {
	return nil, nil, nil
}

// fakes are the run steps a test replaces (Options.Launch, ProbeLaunch,
// LaunchPreflight), read when each run starts, so a test may change them
// between runs; nil keeps the real step.
type fakes struct {
	launch    func(context.Context, *job.Job, *Options) error
	probe     func(context.Context, []remote.HostTarget, int, string, *Options) (*launchprobe.Result, *remote.Pool, error)
	preflight func(context.Context, *job.Job, *Options, io.Writer) error
}

func (f *fakes) adjust(o *Options) {
	if f.launch != nil {
		o.Launch = f.launch
	}
	if f.probe != nil {
		o.ProbeLaunch = f.probe
	}
	if f.preflight != nil {
		o.LaunchPreflight = f.preflight
	}
}

// runAppWith is runApp with steps of the run replaced.
func runAppWith(adjust func(*Options), argv []string, io *cmdutil.IOStreams) int {
	return cmdutil.Execute(testApp(adjust)(io), argv, io)
}

func TestLaunchGetsTheRenderedJob(t *testing.T) {
	var got *job.Job
	f := &fakes{probe: noProbe}
	f.launch = func(ctx context.Context, job *job.Job, opts *Options) error {
		got = job
		return nil
	}
	code, _, errOut := runCLIWith(t, f.adjust, "--hosts", "n[1-2]", "--nproc-per-node", "2", "--max-restarts", "3", "train.py", "--x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got == nil || len(got.Hosts) != 2 || len(got.Hosts[1].Ranks) != 2 {
		t.Fatalf("launchJob got %+v", got)
	}
	// Without --workdir, ranks start where pipette-launch runs (torchrun's
	// behaviour), not in some directory of the launcher's own.
	if wd, _ := os.Getwd(); got.WorkDir != wd {
		t.Errorf("work dir %q, want the launch directory %q", got.WorkDir, wd)
	}
	env := map[string]string{}
	for _, e := range got.Hosts[1].Ranks[1].Env {
		env[e.Name] = e.Value
	}
	if env["RANK"] != "3" || env["WORLD_SIZE"] != "4" || env["MASTER_ADDR"] != "n1" || env["TORCHELASTIC_MAX_RESTARTS"] != "3" {
		t.Errorf("rank 3 env: %v", env)
	}
	f.launch = func(context.Context, *job.Job, *Options) error { return os.ErrDeadlineExceeded }
	if code, _, _ := runCLIWith(t, f.adjust, "--hosts", "n1", "train.py"); code != 1 {
		t.Errorf("a failed launch exits %d, want 1", code)
	}
}

func TestOutputDirWritesRunnableFiles(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, cmdtest.Cat([]string{"--output-dir", dir, "--framework", "deepspeed", "--cluster", "../../../examples/small-offload.yaml", "pretrain_gpt.py"}, gpt13b)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, f := range []string{"box-01.sh", "ds_config.json", "hostfile"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s not written: %v\n%s", f, err, out)
			continue
		}
		if f == "box-01.sh" && st.Mode()&0o100 == 0 {
			t.Errorf("%s is not executable", f)
		}
	}
	var tp, pp, dp int
	i := strings.Index(out, "(deepspeed): TP ")
	if _, err := fmt.Sscanf(out[i:], "(deepspeed): TP %d PP %d DP %d", &tp, &pp, &dp); err != nil || tp*pp*dp != 4 {
		t.Fatalf("no plan summary with TP*PP*DP = 4 GPUs in the output (%v):\n%s", err, out)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "ds_config.json"))
	if err := templates.CheckDSConfig(data, dp, pp); err != nil {
		t.Errorf("written ds_config.json: %v", err)
	}
}

// TestListedHosts: --nproc-per-node caps a hostfile's slots and fills in
// hosts listed without any; user@host:port and Slurm's node list work.
func TestListedHosts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hf := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(hf, []byte("# c\nw1 slots=4\nw2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		opts      Options
		nproc     int
		wantNames []string
		wantSlots []int
		wantUser  string
		wantPort  int
	}{
		{"hostfile capped", Options{Line: launchline.Line{Hostfile: hf}}, 2, []string{"w1", "w2"}, []int{2, 2}, "", 0},
		{"hostfile default slots", Options{Line: launchline.Line{Hostfile: hf}}, 0, []string{"w1", "w2"}, []int{4, 1}, "", 0},
		{"hosts with user and port", Options{Line: launchline.Line{Hosts: "ops@gpu[1-2]:2222"}}, 8, []string{"gpu1", "gpu2"}, []int{8, 8}, "ops", 2222},
		{"slurm", Options{Env: []string{"SLURM_JOB_NODELIST=n[07-08]"}}, 4, []string{"n07", "n08"}, []int{4, 4}, "", 0},
		{"slurm gpus on node", Options{Env: []string{"SLURM_JOB_NODELIST=n[07-08]", "SLURM_GPUS_ON_NODE=8"}}, 0, []string{"n07", "n08"}, []int{8, 8}, "", 0},
		{"slurm gpus on node, nproc wins", Options{Env: []string{"SLURM_JOB_NODELIST=n[07-08]", "SLURM_GPUS_ON_NODE=8"}}, 2, []string{"n07", "n08"}, []int{2, 2}, "", 0},
		{"hosts ignore slurm gpus", Options{Line: launchline.Line{Hosts: "a,b"}, Env: []string{"SLURM_GPUS_ON_NODE=8"}}, 0, []string{"a", "b"}, []int{1, 1}, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hosts, err := listedHosts(&tc.opts, tc.nproc, false)
			if err != nil {
				t.Fatal(err)
			}
			c := hostsCluster(hosts)
			if len(c.Hosts) != len(tc.wantNames) {
				t.Fatalf("%d hosts, want %d", len(c.Hosts), len(tc.wantNames))
			}
			for i, h := range c.Hosts {
				if h.Name != tc.wantNames[i] || h.GPUs != tc.wantSlots[i] || h.User != tc.wantUser || h.Port != tc.wantPort {
					t.Errorf("host %d = %+v, want %s with %d slots, user %q port %d", i, h.HostEntry, tc.wantNames[i], tc.wantSlots[i], tc.wantUser, tc.wantPort)
				}
			}
		})
	}
}

// TestStopGraceMustBePositive: 0 would mean SIGKILL at once; not silently 10s.
func TestStopGraceMustBePositive(t *testing.T) {
	code, _, errOut := runCLI(t, "--hosts", "n1", "--no-check-script", "--stop-grace", "0s", "train.py")
	if code != 2 || !strings.Contains(errOut, "--stop-grace") {
		t.Errorf("exit %d, stderr %q; want 2 naming --stop-grace", code, errOut)
	}
}

// TestShutdownTimeoutIsStopGrace: torchrun's --shutdown-timeout N is
// --stop-grace Ns; the two given apart are refused, naming both.
func TestShutdownTimeoutIsStopGrace(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
		err  string
	}{
		{"neither", nil, launch.DefaultGrace, ""},
		{"torchrun's", []string{"--shutdown-timeout", "45"}, 45 * time.Second, ""},
		{"both, agreeing", []string{"--shutdown-timeout", "3", "--stop-grace", "3s"}, 3 * time.Second, ""},
		{"both, apart", []string{"--shutdown-timeout", "30", "--stop-grace", "3s"}, 0, "--stop-grace 3s and --shutdown-timeout 30 (or PET_SHUTDOWN_TIMEOUT, TORCH_ELASTIC_SHUTDOWN_TIMEOUT) disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts *Options
			var err error
			app := &cli.App{Flags: Flags(), Action: func(c *cli.Context) error {
				opts, err = OptionsFromCLI(c, &cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, nil)
				return nil
			}}
			if runErr := app.Run(append(append([]string{"pipette-launch", "--hosts", "n1"}, tc.args...), "train.py")); runErr != nil {
				t.Fatal(runErr)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || opts.StopGrace != tc.want {
				t.Fatalf("stop grace %v, %v; want %s", opts, err, tc.want)
			}
		})
	}
}

// TestLaunchNeedsHosts: the embedded example is for dry runs; a real launch
// on it says what to give (a line without hosts runs here: nohosts_test.go).
func TestLaunchNeedsHosts(t *testing.T) {
	code, _, errOut := runCLI(t, "--no-check-script", "--cluster", "example", "train.py")
	if code != 2 || !strings.Contains(errOut, "give --cluster FILE") {
		t.Errorf("exit %d, stderr %q; want 2 naming the missing hosts", code, errOut)
	}
}

// TestNNodesAndNProcCapTheCluster: torchrun's flags keep their meaning with
// a cluster file: the first N hosts, at most M ranks on each.
func TestNNodesAndNProcCapTheCluster(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--cluster", "mixed-ib-ethernet.yaml", "--nnodes", "3", "--nproc-per-node", "2", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "# job pipette: 6 ranks on 3 hosts") || strings.Contains(out, "l40s-02") {
		t.Errorf("want 2 ranks on each of the first 3 hosts:\n%s", out)
	}
}

// TestTorchrunCommandLinesKeepWorking: flags torchrun users type either map
// onto pipette-launch's (standalone, rdzv endpoint, role) or are accepted
// with a warning.
func TestTorchrunCommandLinesKeepWorking(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--standalone", "--nnodes=1", "--nproc_per_node=2", "--node_rank", "0",
		"--rdzv_backend", "c10d", "--rdzv-endpoint", "10.0.0.5:29555", "--role", "trainer", "--tee", "3", "train.py", "--x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"== host localhost", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29555", "ROLE_NAME=trainer", "# job pipette: 2 ranks on 1 host"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"--node-rank", "--rdzv-backend", "--tee"} {
		if !strings.Contains(errOut, f+" is ignored") {
			t.Errorf("no warning for %s: %s", f, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "--dry-run", "--standalone", "--hosts", "a", "train.py"); code != 2 || !strings.Contains(errOut, "--standalone runs on this host only") {
		t.Errorf("--standalone with --hosts: exit %d, %s", code, errOut)
	}
}

// TestDryRunWarnsAboutAMissingScript: a dry run starts nothing, so it shows
// the launch and warns; the same command without --dry-run exits 2.
func TestDryRunWarnsAboutAMissingScript(t *testing.T) {
	code, out, errOut := runCLI(t, cmdtest.Cat([]string{"--dry-run", "--cluster", "example", "not_here/pretrain_gpt.py"}, gpt48)...)
	if code != 0 || !strings.Contains(errOut, "warning: script not_here/pretrain_gpt.py not found here") || !strings.Contains(out, "# job pipette: 32 ranks") {
		t.Errorf("exit %d\nstderr: %s\nstdout head: %.200s", code, errOut, out)
	}
}

// TestOffloadLaunches13B: the issue-6 case end to end through runRun: a
// 13B model on one host of 4 x A100 40GB is planned with optimizer offload
// and rendered into launches that pass Megatron's and DeepSpeed's start-up
// checks and carry the offload settings (the golden files pin the text;
// this says what must hold in it).
func TestOffloadLaunches13B(t *testing.T) {
	f := &fakes{probe: noProbe}
	for _, tc := range []struct {
		framework string
		// flags every rank's argv must carry.
		flags []string
	}{
		{"megatron", []string{"--use-distributed-optimizer", "--optimizer-cpu-offload", "--use-precision-aware-optimizer", "--optimizer-offload-fraction", "--overlap-cpu-optimizer-d2h-h2d"}},
		{"deepspeed", []string{"--deepspeed", "--deepspeed_config", "--cpu-optimizer"}},
	} {
		t.Run(tc.framework, func(t *testing.T) {
			var jb *job.Job
			f.launch = func(_ context.Context, j *job.Job, _ *Options) error { jb = j; return nil }
			code, _, errOut := runCLIWith(t, f.adjust, cmdtest.Cat([]string{"--framework", tc.framework, "--cluster", "../../../examples/small-offload.yaml", "pretrain_gpt.py"}, gpt13b)...)
			if code != 0 || jb == nil {
				t.Fatalf("exit %d, job %v: %s", code, jb != nil, errOut)
			}
			if !strings.Contains(errOut, "optimizer offload") {
				t.Errorf("the chosen plan does not offload: %s", errOut)
			}
			var tp, pp int
			for _, h := range jb.Hosts {
				for _, r := range h.Ranks {
					argv := slices.Clone(r.Argv[3:]) // after python3 -u script
					if tc.framework == "deepspeed" {
						argv = slices.DeleteFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--local_rank=") })
					}
					if err := megatron.CheckArgs(argv, 4); err != nil {
						t.Errorf("rank %d: %v\n%q", r.Rank, err, argv)
					}
					for _, f := range tc.flags {
						if !slices.Contains(argv, f) {
							t.Errorf("rank %d lacks %s: %q", r.Rank, f, argv)
						}
					}
					if i := slices.Index(argv, "--optimizer-offload-fraction"); i >= 0 {
						if f, err := strconv.ParseFloat(argv[i+1], 64); err != nil || f <= 0 || f > 1 {
							t.Errorf("rank %d: --optimizer-offload-fraction %q", r.Rank, argv[i+1])
						}
					}
					tp, pp = intFlag(argv, "--tensor-model-parallel-size"), intFlag(argv, "--pipeline-model-parallel-size")
				}
			}
			var ds []byte
			for _, f := range jb.Files {
				if f.Path == templates.DSConfigFile {
					ds = f.Content
				}
			}
			if tc.framework != "deepspeed" {
				if ds != nil {
					t.Errorf("megatron launch writes a ds_config.json")
				}
				return
			}
			if tp*pp == 0 || 4%(tp*pp) != 0 {
				t.Fatalf("argv gives tp %d pp %d on 4 GPUs", tp, pp)
			}
			if err := templates.CheckDSConfig(ds, 4/(tp*pp), pp); err != nil {
				t.Errorf("ds_config.json: %v\n%s", err, ds)
			}
			var cfg struct {
				Zero struct {
					Stage   int `json:"stage"`
					Offload *struct {
						Device string `json:"device"`
						Pin    bool   `json:"pin_memory"`
					} `json:"offload_optimizer"`
				} `json:"zero_optimization"`
			}
			if err := json.Unmarshal(ds, &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Zero.Stage < 1 || cfg.Zero.Offload == nil || cfg.Zero.Offload.Device != "cpu" || !cfg.Zero.Offload.Pin {
				t.Errorf("zero_optimization %+v: want stage >= 1 with offload_optimizer on pinned cpu memory\n%s", cfg.Zero, ds)
			}
		})
	}
}

func intFlag(argv []string, name string) int {
	i := slices.Index(argv, name)
	if i < 0 || i+1 >= len(argv) {
		return 0
	}
	n, _ := strconv.Atoi(argv[i+1])
	return n
}

// Under nohup SIGHUP is ignored: the job must not start catching it (and
// thereby stop on a closed terminal); nor a --signals-to-handle signal
// the process was started ignoring.
func TestStopSignalsKeepIgnoredOnes(t *testing.T) {
	extra := []os.Signal{syscall.SIGUSR1}
	for _, s := range []os.Signal{syscall.SIGHUP, syscall.SIGUSR1} {
		if !signal.Ignored(s) && !slices.Contains(stopSignals(extra), s) {
			t.Fatalf("%s not caught: %v", s, stopSignals(extra))
		}
	}
	if slices.Contains(stopSignals(nil), os.Signal(syscall.SIGUSR1)) {
		t.Errorf("SIGUSR1 caught without --signals-to-handle: %v", stopSignals(nil))
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGUSR1)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGUSR1)
	if got := stopSignals(extra); slices.Contains(got, os.Signal(syscall.SIGHUP)) || slices.Contains(got, os.Signal(syscall.SIGUSR1)) {
		t.Errorf("SIGHUP or SIGUSR1 caught although ignored (nohup): %v", got)
	}
}

// TestEnvForwardingDryRun: shell variables with DeepSpeed's prefixes,
// .deepspeed_env from the launch directory, --env-file and --env reach
// every rank in that order of precedence; secrets are masked in the dry
// run; a variable that says who a rank is cannot be set.
func TestEnvForwardingDryRun(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", t.TempDir())
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("train.py", "")
	write(".deepspeed_env", "# DeepSpeed's format\nFROM_DS=1\nHF_HOME = /ds-env\nLEVEL=ds\n")
	write("more.env", "LEVEL=file\nHF_TOKEN=hf_abc123\n")
	t.Setenv("HF_HOME", "/shell")
	t.Setenv("NCCL_DEBUG", "INFO")
	t.Setenv("WANDB_API_KEY", "wandb-s3cret")
	t.Setenv("MY_OWN", "x")
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := runApp(append([]string{"pipette-launch"}, args...), &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run("--dry-run", "--hosts", "n[1-2]", "--env-file", "more.env", "--env", "LEVEL=flag", "--env", "NCCL_IB_HCA=mlx5_0,mlx5_1", "train.py")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"FROM_DS=1", "HF_HOME=/ds-env", "LEVEL=flag", "NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0,mlx5_1", "WANDB_API_KEY=****", "HF_TOKEN=****"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %s:\n%s", want, out)
		}
	}
	for _, secret := range []string{"wandb-s3cret", "hf_abc123"} {
		if strings.Contains(out+errOut, secret) {
			t.Errorf("the dry run printed the secret %s", secret)
		}
	}
	if strings.Contains(out, "MY_OWN") {
		t.Errorf("a variable without a forwarded prefix was forwarded:\n%s", out)
	}
	if !strings.Contains(errOut, "environment from .deepspeed_env: FROM_DS HF_HOME LEVEL") {
		t.Errorf("stderr does not say where variables came from: %s", errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--env", "WORLD_SIZE=3"}, "--env: WORLD_SIZE is set per rank"},
		{[]string{"--env", "NOEQUALS"}, "want KEY=VALUE"},
		{[]string{"--env-file", "missing.env"}, "env file"},
	} {
		code, _, errOut := run(append(append([]string{"--dry-run", "--hosts", "n1"}, tc.args...), "train.py")...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestInterpreterFromLaunchingPath: .py scripts run under the python3 the
// launching shell finds (a venv's) when the launch probe finds the same
// path on every host; else under the hosts' python3 with a warning naming
// the hosts; --python always wins and is not checked.
func TestInterpreterFromLaunchingPath(t *testing.T) {
	venv := filepath.Join(t.TempDir(), "venv", "bin")
	if err := os.MkdirAll(venv, 0o755); err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(venv, "python3")
	if err := os.WriteFile(py, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fakes{}
	for _, tc := range []struct {
		name        string
		flags       []string
		found       []bool // per host
		wantChecked string
		wantArgv0   string
		wantWarning string
	}{
		{"every host has it", nil, []bool{true, true}, py, py, ""},
		{"one host lacks it", nil, []bool{true, false}, py, "python3", "your python3 (" + py + ") does not exist on n2"},
		{"--python wins", []string{"--python", "/opt/py/bin/python"}, []bool{false, false}, "", "/opt/py/bin/python", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var checked string
			f.probe = func(_ context.Context, targets []remote.HostTarget, rank0 int, python string, _ *Options) (*launchprobe.Result, *remote.Pool, error) {
				checked = python
				lp := &launchprobe.Result{MasterAddr: "10.0.0.1"}
				for i := range targets {
					lp.Hosts = append(lp.Hosts, launchprobe.HostRoute{Ifname: "eth0", PythonFound: tc.found[i]})
				}
				return lp, nil, nil
			}
			var jb *job.Job
			f.launch = func(_ context.Context, j *job.Job, _ *Options) error { jb = j; return nil }
			var errOut bytes.Buffer
			t.Chdir(testdataDir)
			cmdtest.CleanEnv(t)
			t.Setenv("PATH", venv+string(os.PathListSeparator)+os.Getenv("PATH"))
			args := append(append([]string{"pipette-launch", "--hosts", "n[1-2]"}, tc.flags...), "train.py")
			if code := runAppWith(f.adjust, args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &errOut}); code != 0 || jb == nil {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if checked != tc.wantChecked {
				t.Errorf("probe checked %q, want %q", checked, tc.wantChecked)
			}
			if argv0 := jb.Hosts[1].Ranks[0].Argv[0]; argv0 != tc.wantArgv0 {
				t.Errorf("ranks run %q, want %q", argv0, tc.wantArgv0)
			}
			if tc.wantWarning != "" && !strings.Contains(errOut.String(), tc.wantWarning) {
				t.Errorf("stderr lacks %q: %s", tc.wantWarning, errOut.String())
			}
			if env := jb.Hosts[1].Ranks[0].Env; !slices.Contains(env, job.EnvVar{Name: "GLOO_SOCKET_IFNAME", Value: "eth0"}) ||
				!slices.Contains(env, job.EnvVar{Name: "MASTER_ADDR", Value: "10.0.0.1"}) {
				t.Errorf("the probe's findings are not in the rank's env: %v", env)
			}
		})
	}
}

// TestHostsTheUserMeant: inside a Slurm allocation a dry run and
// --output-dir use its nodes, as a launch does; with no hosts from any
// source --output-dir on the embedded example is an error (never scripts for made-up hosts), and a
// dry run on the embedded example says so in its first line.
func TestHostsTheUserMeant(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--cluster", "example", "--no-check-script", "train.py")
	if first, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.Contains(first, "embedded example cluster") {
		t.Errorf("example dry run: exit %d, first line %q: %s", code, first, errOut)
	}
	dir := t.TempDir()
	code, _, errOut = runCLI(t, "--output-dir", dir, "--cluster", "example", "--no-check-script", "train.py")
	if entries, _ := os.ReadDir(dir); code != 2 || !strings.Contains(errOut, "--output-dir: the embedded example") || len(entries) != 0 {
		t.Errorf("--output-dir without hosts: exit %d, %d files written, stderr %q", code, len(entries), errOut)
	}
	t.Setenv("SLURM_JOB_NODELIST", "gpu[07-08]")
	code, out, errOut = runCLI(t, "--dry-run", "--nproc-per-node", "2", "--no-check-script", "train.py")
	if code != 0 || !strings.Contains(out, "== host gpu07") || !strings.Contains(out, "== host gpu08") || strings.Contains(out, "embedded example") {
		t.Errorf("dry run in a Slurm allocation: exit %d, stderr %s\n%s", code, errOut, out)
	}
	code, out, errOut = runCLI(t, "--output-dir", dir, "--nproc-per-node", "2", "--no-check-script", "train.py")
	if _, err := os.Stat(filepath.Join(dir, "gpu08.sh")); code != 0 || err != nil {
		t.Errorf("--output-dir in a Slurm allocation: exit %d (%v), stderr %s\n%s", code, err, errOut, out)
	}
}

// TestUnknownFlagSuggestsAndVersion: a mistyped flag names the closest
// known one in its double-dash form (exit 2; a prefix of one is that flag,
// as in torchrun: TestAbbreviatedFlags); --version prints the version.
func TestUnknownFlagSuggestsAndVersion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nproc_per_nodes", "2", "train.py"}, "did you mean --nproc-per-node?"},
		{[]string{"run", "--mastr-port", "3", "train.py"}, "did you mean --master-port?"},
		{[]string{"--hostfle", "h", "train.py"}, "did you mean --hostfile?"},
		{[]string{"--envfile", "x", "train.py"}, "did you mean --env-file?"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCLI(t, "--zzzzzzzzzz", "train.py"); code != 2 || strings.Contains(errOut, "did you mean") {
		t.Errorf("a flag like no other: exit %d, stderr %q; want 2 and no suggestion", code, errOut)
	}
	code, out, errOut := runCLI(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "pipette-launch version ") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestDeepSpeedLauncherFlags: DeepSpeed's own launcher lines (its
// getting-started guide's resource configuration) keep their meaning:
// --include/--exclude with host:slot,slot@host pick hosts and GPUs
// (CUDA_VISIBLE_DEVICES per host, as its launch.py sets), -H/--hostfile,
// --num_nodes/--num_gpus, --master_port, --ssh_port, and --no_local_rank
// (or torch.distributed.launch's --use_env) drops the --local_rank argument.
func TestDeepSpeedLauncherFlags(t *testing.T) {
	dir := t.TempDir()
	hostfile := filepath.Join(dir, "myhostfile")
	if err := os.WriteFile(hostfile, []byte("worker-1 slots=4\nworker-2 slots=4\nworker-3 slots=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A config DeepSpeed accepts on any number of ranks (it derives the
	// global batch from the micro-batch).
	ds := []string{"train.py", "--deepspeed", "--deepspeed_config", "ds_micro_batch.json"}
	for _, tc := range []struct {
		name    string
		flags   []string
		want    []string
		notWant []string
	}{
		{"include", []string{"-H", hostfile, "--include=worker-2:0,1"},
			[]string{"# job pipette: 2 ranks on 1 host", "== host worker-2", "CUDA_VISIBLE_DEVICES=0,1", "--local_rank=1"}, []string{"worker-1", "worker-3"}},
		{"exclude", []string{"--hostfile=" + hostfile, "--exclude=worker-2:0@worker-3:0,1"},
			[]string{"# job pipette: 9 ranks on 3 hosts", "== host worker-2 (address worker-2, node rank 1, 3 ranks)", "CUDA_VISIBLE_DEVICES=1,2,3", "CUDA_VISIBLE_DEVICES=2,3"}, nil},
		{"num_nodes num_gpus", []string{"--hostfile", hostfile, "--num_nodes=2", "--num_gpus=1", "--master_port", "29600", "--ssh_port", "2222"},
			[]string{"# job pipette: 2 ranks on 2 hosts", "MASTER_PORT=29600"}, []string{"worker-3", "CUDA_VISIBLE_DEVICES"}},
		{"no_local_rank", []string{"--hostfile", hostfile, "--num_gpus", "1", "--no_local_rank"}, []string{"python3 -u train.py --deepspeed"}, []string{"--local_rank"}},
		{"use_env", []string{"--hostfile", hostfile, "--num_gpus", "1", "--use_env"}, []string{"python3 -u train.py --deepspeed"}, []string{"--local_rank"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append(append([]string{"--dry-run"}, tc.flags...), ds...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("has %q:\n%s", w, out)
				}
			}
		})
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--include", "worker-9"}, `host "worker-9" is not in the host list`},
		{[]string{"--include", "worker-1:7"}, `no slot "7" on host worker-1`},
		{[]string{"--include", "worker-1", "--exclude", "worker-2"}, "cannot be combined"},
		{[]string{"--include", "worker-1", "--num_gpus", "2"}, "cannot be combined with --num_nodes/--num_gpus"},
		{[]string{"--exclude", "worker-1@worker-2@worker-3"}, "leaves no host"},
	} {
		code, _, errOut := runCLI(t, append(append([]string{"--dry-run", "--hostfile", hostfile}, tc.flags...), ds...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.flags, code, errOut, tc.want)
		}
	}
}

// TestHostsDifferingOnlyByPort: two hosts with one name and different SSH
// ports are two hosts in the dry run (own node ranks) and in --output-dir
// (own script files).
func TestHostsDifferingOnlyByPort(t *testing.T) {
	hosts := []string{"--hosts", "box:2222,box:2223", "--nproc-per-node", "1", "--no-check-script"}
	code, out, errOut := runCLI(t, append(append([]string{"--dry-run"}, hosts...), "train.py")...)
	if code != 0 || !strings.Contains(out, "== host box:2222 (address box, node rank 0") || !strings.Contains(out, "== host box:2223 (address box, node rank 1") {
		t.Errorf("dry run: exit %d, %s\n%s", code, errOut, out)
	}
	dir := t.TempDir()
	code, _, errOut = runCLI(t, append(append([]string{"--output-dir", dir}, hosts...), "train.py")...)
	for _, f := range []string{"box_2222.sh", "box_2223.sh"} {
		if _, err := os.Stat(filepath.Join(dir, f)); code != 0 || err != nil {
			t.Errorf("--output-dir: exit %d, %v: %s", code, err, errOut)
		}
	}
}

// --nnodes narrows a cluster file with a measured bandwidth matrix: the
// matrix and measured compute lose the dropped hosts' rows, so the narrowed
// file still validates (it used to keep them and fail with
// `measured.hosts[1]: unknown host "node03"`).
func TestRunNNodesTrimsMeasured(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--cluster", "../../../bench/crosscluster/cluster-handwritten.yaml", "--nnodes", "2",
		"--model", "gpt3-125m", "--global-batch-size", "8", "pretrain_gpt.py")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "node01") || !strings.Contains(out, "node02") || strings.Contains(out, "node03") {
		t.Errorf("the plan should use node01 and node02 only:\n%s", out)
	}
}
