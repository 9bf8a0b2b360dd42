package sbatch

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/urfave/cli/v2"
)

// The batch script asks for exactly the listed hosts and passes run's
// flags on, leaving out sbatch's own; --json is refused.
func TestSbatchScriptText(t *testing.T) {
	t.Parallel()
	app := func(io *cmdutil.IOStreams) *cli.App {
		s := NewCmd(io)
		return cmdutil.NewApp(io, s, s)
	}
	code, out, errOut := cmdtest.Exec(app, "pipette-launch", "sbatch", "--hosts", "n[1-2]", "--nproc-per-node", "2", "--time", "1:00:00",
		"--no-check-script", "train.py", "--lr", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"#SBATCH --nodes=2\n", "#SBATCH --nodelist=n1,n2\n", "#SBATCH --time=1:00:00\n",
		" run --launcher slurm ", "--hosts 'n[1-2]'", " train.py --lr 1"} {
		if !strings.Contains(out, w) {
			t.Errorf("batch script lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "--time 1:00:00") {
		t.Errorf("sbatch's own --time reached the inner run:\n%s", out)
	}
	// An elastic --nnodes MIN:MAX with no hosts named asks Slurm for
	// MIN-MAX nodes (issue 30), in an allocation that outlives a failed
	// node (--no-kill); a fixed size does not.
	code, out, errOut = cmdtest.Exec(app, "pipette-launch", "sbatch", "--nnodes", "2:4", "--no-check-script", "train.py")
	if code != 0 || !strings.Contains(out, "#SBATCH --nodes=2-4\n") || !strings.Contains(out, "--nnodes 2:4") || !strings.Contains(out, "#SBATCH --no-kill\n") {
		t.Errorf("elastic: exit %d: %s\n%s", code, errOut, out)
	}
	code, out, errOut = cmdtest.Exec(app, "pipette-launch", "sbatch", "--nnodes", "2:4", "--hosts", "n[1-4]", "--no-check-script", "train.py")
	if code != 0 || !strings.Contains(out, "#SBATCH --no-kill\n") {
		t.Errorf("elastic on named hosts: exit %d: %s\n%s", code, errOut, out)
	}
	code, out, errOut = cmdtest.Exec(app, "pipette-launch", "sbatch", "--nnodes", "4", "--no-check-script", "train.py")
	if code != 0 || strings.Contains(out, "--no-kill") {
		t.Errorf("fixed size: exit %d: %s\n%s", code, errOut, out)
	}
	code, _, errOut = cmdtest.Exec(app, "pipette-launch", "sbatch", "--json", "--hosts", "n1", "--no-check-script", "train.py")
	if code != 2 || !strings.Contains(errOut, "not for a batch script") {
		t.Errorf("--json: exit %d: %s", code, errOut)
	}
}
