package measure

import (
	"context"
	"os/exec"
	"testing"

	"github.com/pipette-launch/pipette-launch/launcher/remote/remotetest"
)

func TestMeasureComputeLocalCPU(t *testing.T) {
	requireTorchPython(t)
	o := ComputeOptions{Python: "/usr/bin/python3", Workers: 2, Threads: 1, Shapes: DefaultComputeShapes(false), BudgetSeconds: 2}
	mc, err := MeasureCompute(context.Background(), []ComputeHost{{Name: "local", Runner: remotetest.Shell{}, Options: o}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", ComputeTable(mc))
	h := mc.Hosts[0]
	if h.Device != "cpu" || h.Workers != 2 || len(h.GEMM) == 0 || h.AllReduceBusGBytePerS <= 0 {
		t.Errorf("unexpected result %+v", h)
	}
}

// requireTorchPython fails (never skips) without Debian's torch.
func requireTorchPython(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("/usr/bin/python3", "-c", "import torch.distributed as d; assert d.is_gloo_available()").CombinedOutput(); err != nil {
		t.Fatalf("/usr/bin/python3 cannot import torch with gloo (%v): %s\ninstall Debian's torch: apt-get install python3-torch", err, out)
	}
}
