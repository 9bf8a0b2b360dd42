package cmdutil

import (
	"context"
	"os/exec"
	"strings"
	"time"
)

// LocalGPUs counts this machine's GPUs with nvidia-smi -L (no torch import
// needed); 0 with the reason when there are none.
func LocalGPUs(ctx context.Context) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "-L").Output()
	if err != nil {
		if _, lerr := exec.LookPath("nvidia-smi"); lerr != nil {
			return 0, "nvidia-smi is not installed"
		}
		return 0, "nvidia-smi -L failed: " + err.Error()
	}
	n := CountGPUs(string(out))
	if n == 0 {
		return 0, "nvidia-smi -L lists no GPU"
	}
	return n, ""
}

// CountGPUs counts the GPU lines of nvidia-smi -L ("GPU 0: NVIDIA H100
// 80GB HBM3 (UUID: GPU-...)"); MIG devices are indented lines under them.
func CountGPUs(out string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "GPU ") {
			n++
		}
	}
	return n
}

// VisibleGPUs is n GPUs as CUDA_VISIBLE_DEVICES narrows them for the ranks
// (which inherit it here), as torch.cuda.device_count() counts: the list up
// to its first invalid entry, at most n.
func VisibleGPUs(n int, env []string) int {
	v, set := "", false
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == "CUDA_VISIBLE_DEVICES" {
			v, set = val, true
		}
	}
	if !set {
		return n
	}
	count := 0
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" || strings.HasPrefix(e, "-") {
			break
		}
		count++
	}
	return min(count, n)
}
