package run

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestRunPreflightGatesTheJob: run --preflight starts the preflight first,
// with the job's own environment, and starts the job only when every group
// passed; a failing group stops it with exit 1 naming the group.
func TestRunPreflightGatesTheJob(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fakes{probe: noProbe}
	for _, fail := range []bool{false, true} {
		var order []string
		var jobEnv, pfEnv []job.EnvVar
		f.launch = func(_ context.Context, job *job.Job, _ *Options) error {
			order = append(order, "job")
			jobEnv = job.Hosts[1].Ranks[0].Env
			return nil
		}
		f.preflight = func(_ context.Context, job *job.Job, _ *Options, out io.Writer) error {
			order = append(order, "preflight")
			pfEnv = job.Hosts[1].Ranks[0].Env
			// Two hosts, one rank each: a DP group of ranks 0 and 1.
			for rank, h := range []string{"w1", "w2"} {
				ok := !(fail && rank == 1)
				fmt.Fprintf(out, "%s:%d: ::pipette-preflight:: {\"event\":\"group\",\"id\":\"dp0\",\"rank\":%d,\"ok\":%v,\"error\":\"RuntimeError: connect\",\"seconds\":[0.01],\"backend\":\"gloo\"}\n", h, rank, rank, ok)
			}
			return nil
		}
		code, _, errOut := runCLIAtWith(t, f.adjust, dir, "--preflight", "--hosts", "w1,w2", "--nproc-per-node", "1", "train.py")
		want, wantOrder := 0, "preflight job"
		if fail {
			want, wantOrder = 1, "preflight"
		}
		if code != want || strings.Join(order, " ") != wantOrder {
			t.Fatalf("fail=%v: exit %d, started %v; want exit %d, %s\n%s", fail, code, order, want, wantOrder, errOut)
		}
		if !fail && fmt.Sprint(pfEnv) != fmt.Sprint(jobEnv) {
			t.Errorf("the preflight's environment differs from the job's:\n%v\n%v", pfEnv, jobEnv)
		}
		if fail && !strings.Contains(errOut, "preflight failed: dp group dp0 (ranks 0,1 on w1,w2") {
			t.Errorf("stderr does not name the group:\n%s", errOut)
		}
	}
}
