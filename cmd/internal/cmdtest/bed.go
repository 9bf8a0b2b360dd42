package cmdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/testbed"
)

// The test-bed jobs: real torch.distributed (gloo) all-reduces started
// through the CLI on 4 hosts (network namespaces with their own sshd, and
// Slurm when asked), 2 ranks each.

// SlurmBed is a 4-host Slurm test-bed with the example job and a built
// pipette-launch under /var/tmp, which every host sees (each has a private
// /tmp).
func SlurmBed(t *testing.T, names string) (*testbed.Testbed, string, string) {
	t.Helper()
	tb, dir := Bed(t, testbed.Spec{Slurm: true, Names: names})
	return tb, dir, Build(t, dir)
}

// Build builds cmd/pipette-launch into dir and returns the binary's path.
func Build(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "pipette-launch")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(Testdata, "..", "..", "pipette-launch")).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SlurmJobArgs is the torch all-reduce job's flags and script on port.
func SlurmJobArgs(dir string, port int, extra ...string) []string {
	args := []string{"--nproc-per-node", "2", "--framework", "torch", "--python", BedPython, "--workdir", dir,
		"--stop-grace", "3s", "--master-port", fmt.Sprint(port), filepath.Join(dir, "torch_allreduce.py"),
		"--expect-world", "8", "--timeout", "60"}
	return append(args, extra...)
}

// CheckAllreduceOutput checks every rank's environment and all-reduce line.
func CheckAllreduceOutput(t *testing.T, text, masterAddr string, hosts []string) {
	t.Helper()
	for n, h := range hosts {
		for l := 0; l < 2; l++ {
			r := n*2 + l
			for _, w := range []string{
				fmt.Sprintf("%s:%d: ENV RANK=%d LOCAL_RANK=%d WORLD_SIZE=8 LOCAL_WORLD_SIZE=2 MASTER_ADDR=%s MASTER_PORT=", h, r, r, l, masterAddr),
				fmt.Sprintf("%s:%d: ALLREDUCE OK rank=%d sum=36", h, r, r),
			} {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q", w)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// Bed brings up 4 test-bed hosts for spec (Slurm, name resolution); its hosts are
// node1..node4.
func Bed(t *testing.T, spec testbed.Spec) (*testbed.Testbed, string) {
	t.Helper()
	if out, err := exec.Command(BedPython, "-c", "import torch.distributed").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch.distributed (install the Debian package python3-torch): %v\n%s", BedPython, err, out)
	}
	for i := 1; i <= 4; i++ {
		spec.Hosts = append(spec.Hosts, testbed.HostSpec{Name: fmt.Sprintf("node%d", i)})
	}
	tb := testbed.New(t, spec)
	dir, err := os.MkdirTemp("/var/tmp", "pipette-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, err := os.ReadFile(filepath.Join(Testdata, "..", "..", "..", "examples", "torch_allreduce.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "torch_allreduce.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	return tb, dir
}
