package probe

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// probe --measure on two test-bed hosts of two CPU slots: the compute sweep
// runs torch on every host (its slots at once) and the cluster file carries
// per-host GEMM rates and the intra-host all-reduce, which the planner uses
// instead of the nominal --cpu-tflops.
func TestProbeMeasureComputeOnTestbed(t *testing.T) {
	if out, err := exec.Command(cmdtest.BedPython, "-c", "import torch.distributed").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch.distributed (install the Debian package python3-torch): %v\n%s", cmdtest.BedPython, err, out)
	}
	tb := testbed.New(t, testbed.Spec{Hosts: []testbed.HostSpec{{Name: "cpu1", Group: "a"}, {Name: "cpu2", Group: "a"}}})
	out := filepath.Join(t.TempDir(), "cluster.yaml")
	var stdout, stderr bytes.Buffer
	opts := &Options{
		IO:    &cmdutil.IOStreams{Out: &stdout, ErrOut: &stderr},
		Hosts: "cpu1,cpu2",
		SSH: remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile,
			IdentityFiles: []string{tb.KeyFile}},
		NProcPerNode: 2, CPUSlotTFLOPS: 1, Measure: true, MeasureSeconds: 1, MeasurePort: 5303, Reprobe: true,
		CacheDir: t.TempDir(), ComputeSeconds: 1, Python: cmdtest.BedPython, Output: out,
	}
	if err := Run(opts); err != nil {
		t.Fatalf("probe: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatalf("written cluster file does not parse: %v\n%s", err, data)
	}
	mc := f.MeasuredCompute
	if mc == nil || len(mc.Hosts) != 2 || mc.MeasuredAt.IsZero() || !strings.HasPrefix(mc.Tool, "torch ") {
		t.Fatalf("measured_compute %+v\n%s", mc, data)
	}
	for _, h := range mc.Hosts {
		if h.Device != "cpu" || h.Workers != 2 || len(h.GEMM) == 0 || h.AllReduceBusGBytePerS <= 0 {
			t.Errorf("%s: %+v", h.Host, h)
		}
		for _, s := range h.GEMM {
			// A CPU slot is far below the nominal 1 TFLOP/s and above 0.
			if s.Precision != "fp32" || s.TFLOPS <= 0 || s.TFLOPS > 1 {
				t.Errorf("%s: sample %+v", h.Host, s)
			}
		}
	}
	if !strings.Contains(stdout.String(), "compute measured with torch") {
		t.Errorf("summary lacks the compute table:\n%s", stdout.String())
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	scale, _, _ := cluster.MeasuredScale(gpu.Spec{Model: "cpu", PeakTFLOPS: 1}, mc.Hosts[0])
	if got := c.Hosts[0].GPU.PeakTFLOPS; got >= 1 || got <= 0 || scale <= 0 {
		t.Errorf("resolved peak %g TFLOP/s (host scale %g): the measurement was not applied", got, scale)
	}
}
