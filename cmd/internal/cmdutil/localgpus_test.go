package cmdutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCountGPUs(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"nvidia-h200.L.txt", "nvidia-h100-80gb-hbm3.L.txt"} {
		b, err := os.ReadFile(filepath.Join("../../../launcher/probe/testdata/nvidia-smi", f))
		if err != nil {
			t.Fatalf("fixture: %v", err)
		}
		if n := CountGPUs(string(b)); n != 1 {
			t.Errorf("%s: %d GPUs, want 1", f, n)
		}
	}
	mig := "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-x)\n  MIG 1g.5gb      Device  0: (UUID: MIG-y)\n  MIG 1g.5gb      Device  1: (UUID: MIG-z)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-w)\n"
	if n := CountGPUs(mig); n != 2 {
		t.Errorf("MIG listing: %d GPUs, want 2", n)
	}
}
