package remote

import (
	"strings"
	"testing"
)

// TestHostfileSlotTypo (issue 21): "worker-0:8" in a hostfile is a slot
// count written the MPI way, refused naming the DeepSpeed spelling, not
// SSH port 8 with one rank; real ports (22, 2222) still work.
func TestHostfileSlotTypo(t *testing.T) {
	if _, err := ParseHostfile("hf", strings.NewReader("worker-0:8\nworker-1:8\n")); err == nil || !strings.Contains(err.Error(), `worker-0 slots=8`) {
		t.Errorf("worker-0:8: error %v, want one naming \"worker-0 slots=8\"", err)
	}
	hosts, err := ParseHostfile("hf", strings.NewReader("box:2222\nnode1:22 slots=4\n"))
	if err != nil || len(hosts) != 2 || hosts[0].Port != 2222 || hosts[1].Port != 22 || hosts[1].Slots != 4 {
		t.Errorf("ports: %+v, %v", hosts, err)
	}
}
