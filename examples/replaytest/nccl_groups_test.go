package replaytest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNCCLGroupsHelper runs examples/pipette_nccl_groups_test.py: the
// helper imports, picks IB only for groups inside one RDMA fabric, and
// builds ProcessGroupNCCL options (or, on a CPU torch, says what is
// missing).
func TestNCCLGroupsHelper(t *testing.T) {
	requireTorch(t)
	out, err := exec.Command(python, filepath.Join("..", "pipette_nccl_groups_test.py")).CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("pipette_nccl_groups_test.py: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
