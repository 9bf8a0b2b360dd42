package run

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestElasticRestartUsesPlanMadeAhead (issue 30 item 6): while the first
// attempt runs, the plan after losing each of its hosts is made ahead (as
// Oobleck's pipeline templates are); the restart after such a loss takes
// it without a new search, and it is the very plan --dry-run prints for
// that loss. A restart on hosts no plan was made for (or before one is
// ready) plans as before: TestElasticRestartLinesPassMegatron reports its
// losses at once.
func TestElasticRestartUsesPlanMadeAhead(t *testing.T) {
	args := cmdtest.Cat([]string{"--nnodes", "3:4", "--nproc-per-node", "4", "--max-restarts", "1", "--cluster", "mixed-ib-ethernet.yaml",
		"--no-check-script", "pretrain_gpt.py", "--save-interval", "100"}, small24)
	code, out, errOut := runCLI(t, append([]string{"--dry-run"}, args...)...)
	if code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut)
	}
	predicted := map[string]string{} // host lost -> the summary of the plan the dry run says the job restarts with
	for _, m := range regexp.MustCompile(`(?m)^# (\S+) lost: restarts on [^:]*: (.*)$`).FindAllStringSubmatch(out, -1) {
		predicted[m[1]] = m[2]
	}
	if len(predicted) != 4 {
		t.Fatalf("want the plan after each of 4 losses in the dry run, got %d\n%s", len(predicted), out)
	}

	ready := make(chan struct{})
	var jobs []*job.Job
	f := &fakes{probe: noProbe, launch: func(_ context.Context, j *job.Job, _ *Options) error {
		jobs = append(jobs, j)
		if len(jobs) > 1 {
			return nil
		}
		select { // the first attempt runs until the plans made ahead are ready
		case <-ready:
		case <-time.After(2 * time.Minute):
			t.Error("the plans after each loss were never all made")
		}
		return launch.NewHostLost(j.Name, j.Hosts[1].Name, "connection lost: nothing heard from the host for 30s", time.Now())
	}}
	adjust := func(o *Options) {
		f.adjust(o)
		o.aheadDone = func() { close(ready) }
	}
	code, _, errOut = runCLIWith(t, adjust, args...)
	if code != 0 || len(jobs) != 2 {
		t.Fatalf("exit %d after %d attempts\n%s", code, len(jobs), errOut)
	}
	lost := jobs[0].Hosts[1].Name
	if want := "pipette-launch: the plan after losing " + lost + " was made ahead, while the first attempt ran: no new search"; !strings.Contains(errOut, want) {
		t.Errorf("the restart searched again: no %q in\n%s", want, errOut)
	}
	if want := "pipette-launch: " + predicted[lost] + "\n"; !strings.Contains(errOut, want) {
		t.Errorf("the restart's plan is not the dry run's for losing %s (%q)\n%s", lost, predicted[lost], errOut)
	}
	for _, h := range jobs[1].Hosts {
		if h.Name == lost {
			t.Errorf("the restart runs on %s, the host lost", lost)
		}
	}
	if ranks(jobs[1]) >= ranks(jobs[0]) {
		t.Errorf("the restart has %d ranks, the first attempt %d", ranks(jobs[1]), ranks(jobs[0]))
	}
}
