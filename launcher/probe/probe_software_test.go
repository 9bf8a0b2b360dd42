package probe

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// TestProbeReadsSoftware runs the real probe command here with Debian's
// python3 first on PATH (testbed.md: root's PATH may find a pyenv Python
// without torch first): python3-torch has package metadata, so the probe
// reports torch's version (NCCL and Megatron-Core are not installed as
// packages on this machine).
func TestProbeReadsSoftware(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), "sh", "-c", ProbeCommand())
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin:/usr/sbin:/sbin")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	hp, err := ParseProbeOutput(string(out))
	if err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command("/usr/bin/python3", "-c", "import importlib.metadata as m; print(m.version('torch'))").Output()
	if err != nil {
		t.Fatalf("python3 on PATH has no torch metadata (install python3-torch): %v", err)
	}
	if hp.Software.Torch == "" || hp.Software.Torch+"\n" != string(want) {
		t.Errorf("torch %q, want %q", hp.Software.Torch, want)
	}
}

func TestParseSoftware(t *testing.T) {
	got := parseSoftware("torch 2.4.0+cu121\nnccl 2.20.5\nmegatron_core \n")
	if got != (cluster.SoftwareVersions{Torch: "2.4.0+cu121", NCCL: "2.20.5"}) {
		t.Errorf("%+v", got)
	}
}
