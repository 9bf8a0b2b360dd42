package sbatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// The batch script `pipette-launch sbatch` writes runs as it is under
// `sbatch --wait`, and passes the same job.
func TestSbatchScriptRunsAsWritten(t *testing.T) {
	tb, dir, bin := cmdtest.SlurmBed(t, "")
	script := filepath.Join(dir, "job.sbatch")
	args := append([]string{"sbatch", "--hosts", "node[1-4]", "--time", "10:00", "--write", script}, cmdtest.SlurmJobArgs(dir, 29641)...)
	// Submitted from the shared directory, as a user would: the batch script
	// starts where sbatch ran, and each host has a private /tmp (where this
	// checkout may live).
	gen := exec.Command(bin, args...)
	gen.Dir = dir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("pipette-launch sbatch: %v\n%s", err, out)
	}
	body, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"#SBATCH --nodes=4\n", "#SBATCH --ntasks-per-node=1\n", "#SBATCH --nodelist=node1,node2,node3,node4\n",
		"#SBATCH --time=10:00\n", "#SBATCH --signal=B:TERM@120\n", " run --launcher slurm "} {
		if !strings.Contains(string(body), w) {
			t.Errorf("batch script lacks %q:\n%s", w, body)
		}
	}
	if strings.Contains(string(body), "--gpus-per-node") {
		t.Errorf("batch script asks for GPUs on CPU hosts:\n%s", body)
	}
	outFile := filepath.Join(dir, "slurm.out")
	cmd := exec.Command("sbatch", "--wait", "-o", outFile, script)
	cmd.Env = append(os.Environ(), tb.SlurmEnv()...)
	cmd.Dir = dir
	if o, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(outFile)
		t.Fatalf("sbatch --wait: %v: %s\njob output:\n%s", err, o, log)
	}
	log, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	cmdtest.CheckAllreduceOutput(t, string(log), tb.Hosts[0].Addr, []string{"node1", "node2", "node3", "node4"})
	tb.WaitSlurmStepsGone(30 * time.Second)
	tb.AssertNothingLeft(t)
}
