package run

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestElasticRestartLinesPassMegatron (issue 30): for each host of the
// first attempt lost alone, the job the elastic loop restarts with (its
// real restart: the attempt's launch reports the host lost) gives rank 0 a
// line that Megatron-LM core_v0.19.0's own parse_args and validate_args
// (and the configs pretrain builds) accept, run through the Megatron kit
// of ../shared/frameworks; a legacy checkpoint (--ckpt-format torch)
// restarts with the first attempt's TP and PP, torch_dist is planned
// afresh. The kit chroots: root only; make deps sets it up.
func TestElasticRestartLinesPassMegatron(t *testing.T) {
	validate := megatronKit(t)
	type restart struct {
		name        string
		first, next *job.Job
	}
	var restarts []restart
	for _, format := range []string{"torch", "torch_dist"} {
		for lost := 0; lost < 4; lost++ {
			var jobs []*job.Job
			f := &fakes{probe: noProbe, launch: func(_ context.Context, j *job.Job, _ *Options) error {
				jobs = append(jobs, j)
				if len(jobs) == 1 {
					return launch.NewHostLost(j.Name, j.Hosts[lost].Name, "connection lost: nothing heard from the host for 30s", time.Now())
				}
				return nil
			}}
			args := cmdtest.Cat([]string{"--nnodes", "3:4", "--nproc-per-node", "4", "--max-restarts", "1", "--cluster", "mixed-ib-ethernet.yaml", "--no-check-script",
				"pretrain_gpt.py", "--ckpt-format", format, "--save-interval", "100"}, small24) // Megatron wants one with --save
			code, _, errOut := runCLIWith(t, f.adjust, args...)
			if code != 0 || len(jobs) != 2 {
				t.Fatalf("%s, host %d lost: exit %d after %d attempts\n%s", format, lost, code, len(jobs), errOut)
			}
			restarts = append(restarts, restart{name: format + ": " + jobs[0].Hosts[lost].Name + " lost", first: jobs[0], next: jobs[1]})
		}
	}
	// Each check starts python, torch and Megatron in the kit's root (~8 s
	// of CPU): each distinct line once (losing either of two alike hosts
	// gives the same), two at a time.
	verdicts := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, r := range restarts {
		line := kitRequest(rankZero(r.next))
		mu.Lock()
		_, seen := verdicts[line]
		verdicts[line] = ""
		mu.Unlock()
		if seen {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			v := validate(line)
			mu.Lock()
			verdicts[line] = v
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, r := range restarts {
		verdict := verdicts[kitRequest(rankZero(r.next))]
		a, b := megatron.Parse(rankZero(r.first).Argv), megatron.Parse(rankZero(r.next).Argv)
		layout := func(p megatron.Args) string {
			return "TP " + cmp.Or(p.Value("--tensor-model-parallel-size"), "1") + " PP " + cmp.Or(p.Value("--pipeline-model-parallel-size"), "1")
		}
		t.Logf("%s: %s -> %s, world %d -> %d: %s", r.name, layout(a), layout(b), ranks(r.first), ranks(r.next), verdict)
		if !strings.HasPrefix(verdict, "OK") {
			t.Errorf("%s: Megatron refuses the restart's rank 0: %s\nargv: %q", r.name, verdict, rankZero(r.next).Argv)
		}
		if ranks(r.next) >= ranks(r.first) {
			t.Errorf("%s: the restart has %d ranks, the first attempt %d", r.name, ranks(r.next), ranks(r.first))
		}
		if strings.HasPrefix(r.name, "torch:") && layout(a) != layout(b) {
			t.Errorf("%s: a legacy checkpoint restarts with %s, want the first attempt's %s", r.name, layout(b), layout(a))
		}
	}
}

func ranks(j *job.Job) int {
	n := 0
	for _, h := range j.Hosts {
		n += len(h.Ranks)
	}
	return n
}

// kitRequest is a rank as validate.py reads it (--json): its argv after
// the training script and its environment.
func kitRequest(r *job.RankJob) string {
	argv := r.Argv
	for i, a := range argv {
		if strings.HasSuffix(a, ".py") {
			argv = argv[i+1:]
			break
		}
	}
	env := map[string]string{}
	for _, e := range r.Env {
		env[e.Name] = e.Value
	}
	b, _ := json.Marshal(map[string]any{"argv": argv, "env": env}) // strings only: cannot fail
	return string(b)
}

// megatronKit is the Megatron kit's check of one rank (kitRequest):
// validate.py's verdict line, "OK: ..." or "ERROR <stage>: <Megatron's
// message>". It fails the test, saying what is missing, where the kit is
// not set up (make deps sets it up) or this is not root (the kit chroots).
func megatronKit(t *testing.T) func(request string) string {
	t.Helper()
	dir := os.Getenv("PIPETTE_FRAMEWORKS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "frameworks")
	}
	script, err := filepath.Abs(filepath.Join(dir, "megatron", "validate.py"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("the Megatron kit: %v (set PIPETTE_FRAMEWORKS)", err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("the Megatron kit chroots into its root file system: run as root")
	}
	home, _ := os.UserHomeDir()
	root := filepath.Join(cmp.Or(os.Getenv("XDG_CACHE_HOME"), filepath.Join(home, ".cache")), "pipette-frameworks", "megatron", "rootfs")
	if env := os.Getenv("PIPETTE_MEGATRON_ENV"); env != "" {
		root = filepath.Join(env, "rootfs")
	}
	if _, err := os.Stat(filepath.Join(root, "opt", "megatron-lm")); err != nil {
		t.Fatalf("the Megatron kit's root is not set up (make deps runs its setup.sh): %v", err)
	}
	return func(request string) string {
		cmd := exec.Command("/usr/bin/python3", script, "--root", root, "--json", "-")
		cmd.Stdin = strings.NewReader(request)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		verdict := lines[len(lines)-1]
		if err != nil && !strings.HasPrefix(verdict, "ERROR") {
			verdict = "ERROR running the kit: " + err.Error() + ": " + string(out)
		}
		return verdict
	}
}
