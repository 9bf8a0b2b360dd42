// Package cmdtest holds what the command packages' tests share: the
// fixtures in cmd/internal/testdata, a clean environment, and running a CLI
// built from some commands in-process. Only tests import it.
package cmdtest

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/text"
	"github.com/urfave/cli/v2"
)

// Testdata is the absolute path of cmd/internal/testdata, the fixtures
// (cluster files, scripts, DeepSpeed configs) of every command's tests.
var Testdata = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata")
}()

// BedPython is the interpreter test-bed jobs use: root's PATH may find a
// python without torch first.
const BedPython = "/usr/bin/python3"

// JobID stands in for run's job id in tests: one id per name, so dry-run
// output (golden files) is stable.
func JobID(name string) string { return text.SafeName(name) + "-ID" }

// Exec runs the app newApp builds on argv (argv[0] is the program) with
// empty stdin and returns the exit code, stdout and stderr.
func Exec(newApp func(*cmdutil.IOStreams) *cli.App, argv ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	io := &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	code := cmdutil.Execute(newApp(io), argv, io)
	return code, out.String(), errOut.String()
}

// forwardedRE matches the variables a launch forwards to every rank.
var forwardedRE = regexp.MustCompile(`^(NCCL|PYTHON|MV2|UCX|MLFLOW|CUDA_|TORCH_|HF_|WANDB_|OMP_|DS_ENV_FILE)`)

// CleanEnv takes the forwarded variables out of the test's environment
// (golden files must not depend on the machine's) and points HOME at an
// empty directory, so no ~/.deepspeed_env is read.
func CleanEnv(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CACHE_HOME", "") // launch probes are cached under HOME
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if forwardedRE.MatchString(k) {
			t.Setenv(k, v) // restores it after the test
			os.Unsetenv(k)
		}
	}
}

// CleanEnviron is the environment CleanEnv leaves, as a list, for a
// command given its environment (run's Options.Env) by a test that runs
// in parallel and so cannot change the process's (t.Setenv).
func CleanEnviron(t *testing.T) []string {
	t.Helper()
	env := []string{"HOME=" + t.TempDir(), "XDG_CACHE_HOME="}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "XDG_CACHE_HOME" && !forwardedRE.MatchString(k) {
			env = append(env, kv)
		}
	}
	return env
}

// Cat joins argument lists.
func Cat(a ...[]string) []string {
	var out []string
	for _, x := range a {
		out = append(out, x...)
	}
	return out
}

// ExitCode is the exit code an error from a command's action asks for (0
// when it asks for none).
func ExitCode(err error) int {
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 0
}

// Run runs `pipette-launch args...` through the app newApp builds, where
// the test is.
func Run(newApp func(*cmdutil.IOStreams) *cli.App, args ...string) (int, string, string) {
	return Exec(newApp, append([]string{"pipette-launch"}, args...)...)
}

// RunInTestdata is Run in Testdata with a clean environment (CleanEnv).
func RunInTestdata(t *testing.T, newApp func(*cmdutil.IOStreams) *cli.App, args ...string) (int, string, string) {
	t.Helper()
	t.Chdir(Testdata)
	CleanEnv(t)
	return Run(newApp, args...)
}

// TwoClustersWithVersions writes examples/two-clusters.yaml with every
// host's NCCL, torch and Megatron-Core versions recorded (as `probe`
// records them) into a temporary file and returns its path: with versions
// known, a Megatron plan keeps RDMA inside the InfiniBand island.
func TwoClustersWithVersions(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(Testdata, "..", "..", "..", "examples", "two-clusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sw := "    software: {nccl: 2.21.5, torch: 2.4.0, megatron_core: 0.12.0}\n"
	withVersions := strings.NewReplacer("    pcie_gen: 5\n", "    pcie_gen: 5\n"+sw, "    pcie_gen: 4\n", "    pcie_gen: 4\n"+sw).Replace(string(src))
	if withVersions == string(src) {
		t.Fatal("could not add software fields to examples/two-clusters.yaml")
	}
	path := filepath.Join(t.TempDir(), "two-clusters-versions.yaml")
	if err := os.WriteFile(path, []byte(withVersions), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
