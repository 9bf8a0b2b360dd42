package run

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

var small24 = []string{"--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16",
	"--seq-length", "2048", "--max-position-embeddings", "2048", "--vocab-size", "50257",
	"--global-batch-size", "96", "--bf16", "--save", "/ckpt", "--load", "/ckpt"}

// TestElasticDryRunPlansEachLoss (issue 30): with --nnodes MIN:MAX a dry
// run also prints, for each host lost alone, the plan the job restarts
// with and what changes; a legacy Megatron checkpoint (--ckpt-format
// torch) keeps TP and PP (only DP changes), torch_dist is planned afresh;
// a plain torch job keeps its ranks per host on fewer hosts.
func TestElasticDryRunPlansEachLoss(t *testing.T) {
	layout := regexp.MustCompile(`TP (\d+) PP (\d+) DP (\d+)`)
	t.Run("megatron legacy keeps TP and PP", func(t *testing.T) {
		args := cmdtest.Cat([]string{"--dry-run", "--nnodes", "3:4", "--nproc-per-node", "4", "--cluster", "mixed-ib-ethernet.yaml", "pretrain_gpt.py", "--ckpt-format", "torch"}, small24)
		code, out, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		first := layout.FindStringSubmatch(out)
		lines := regexp.MustCompile(`(?m)^# (\S+) lost: restarts on .*$`).FindAllString(out, -1)
		if first == nil || len(lines) != 4 {
			t.Fatalf("want the first plan and 4 loss lines, got %v, %d\n%s", first, len(lines), out)
		}
		for _, l := range lines {
			m := layout.FindStringSubmatch(l)
			if m == nil || m[1] != first[1] || m[2] != first[2] || m[3] == first[3] {
				t.Errorf("%q: want TP %s PP %s kept and DP changed from %s", l, first[1], first[2], first[3])
			}
		}
	})
	t.Run("megatron torch_dist replans", func(t *testing.T) {
		args := cmdtest.Cat([]string{"--dry-run", "--nnodes", "3:4", "--cluster", "mixed-ib-ethernet.yaml", "pretrain_gpt.py"}, small24)
		code, out, errOut := runCLI(t, args...)
		if code != 0 || strings.Count(out, " lost: restarts on ") != 4 || !strings.Contains(out, "changes: WORLD_SIZE 32 -> 24, --pipeline-model-parallel-size 16 -> ") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("json carries the same plans", func(t *testing.T) {
		args := cmdtest.Cat([]string{"--dry-run", "--nnodes", "3:4", "--cluster", "mixed-ib-ethernet.yaml", "pretrain_gpt.py"}, small24)
		code, text, errOut := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, errOut)
		}
		code, out, errOut := runCLI(t, append([]string{"--json"}, args...)...)
		var got struct {
			AfterLosing []lossView `json:"elastic_after_losing"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got.AfterLosing) != 4 {
			t.Fatalf("exit %d, want 4 losses in elastic_after_losing\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
		for _, v := range got.AfterLosing {
			line := "# " + v.Lost + " lost: restarts on " + strings.Join(v.RestartsOn, " ") + ": " + v.Summary + "\n#   changes: " + strings.Join(v.Changes, ", ")
			if v.Stops != "" || v.PredictedIterationSeconds <= 0 || !strings.Contains(text, line) {
				t.Errorf("%+v: not the text dry run's %q\n%s", v, line, text)
			}
		}
	})
	t.Run("torch", func(t *testing.T) {
		code, out, errOut := runCLI(t, "--dry-run", "--nnodes", "3:4", "--max-restarts", "3", "--rdzv-backend", "c10d", "--hosts", "n[1-4]", "--nproc-per-node", "2", "train.py")
		for _, w := range []string{"# elastic (--nnodes 3:4, --max-restarts 3): the plan after losing one host",
			"# n2 lost: restarts on n1 n3 n4: torchrun rank order (no planning): 6 ranks on 3 host(s)", "#   changes: WORLD_SIZE 8 -> 6"} {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("exit %d, stdout lacks %q\nstdout:\n%s\nstderr:\n%s", code, w, out, errOut)
			}
		}
	})
	t.Run("no layout on every GPU left", func(t *testing.T) {
		// 30 hosts of 8 GPUs: 29 left (232 GPUs) have no layout for a
		// global batch of 96 (the factor 29 would be PP, above 24 layers),
		// so the restart leaves hosts idle, naming them, with at least MIN
		// running; with MIN 29 it cannot, and the job would stop.
		cf := a100Cluster(t, t.TempDir(), 30, 8, "A100-80GB-SXM", "{type: infiniband, count: 4, rate_gbit_per_s: 200}")
		for _, c := range []struct {
			nnodes string
			ok     bool
		}{{"20:30", true}, {"29:30", false}} {
			code, out, errOut := runCLI(t, cmdtest.Cat([]string{"--dry-run", "--nnodes", c.nnodes, "--cluster", cf, "pretrain_gpt.py"}, small24)...)
			restarts := regexp.MustCompile(`(?m)^# n\d+ lost: restarts on .*leaves (\d+) GPUs on .* idle, nothing is started there \(no layout uses all 232 GPUs`).FindAllStringSubmatch(out, -1)
			stops := strings.Count(out, " lost: no plan on ")
			switch {
			case code != 0:
				t.Errorf("--nnodes %s: exit %d\n%s", c.nnodes, code, errOut)
			case c.ok && len(restarts) != 30:
				t.Errorf("--nnodes %s: %d of 30 losses restart with hosts idle, want all\n%s", c.nnodes, len(restarts), out)
			case !c.ok && (len(restarts) != 0 || stops != 30):
				t.Errorf("--nnodes %s: %d losses restart, %d stop; want every loss to stop (fewer than MIN hosts would run)\n%s", c.nnodes, len(restarts), stops, out)
			}
			for _, r := range restarts {
				if idle, _ := strconv.Atoi(r[1]); 232-idle < 20*8 {
					t.Errorf("%q: fewer than MIN 20 hosts run", r[0])
				}
			}
		}
	})
	t.Run("MIN leaves no room", func(t *testing.T) {
		code, out, _ := runCLI(t, "--dry-run", "--nnodes", "4:4", "--hosts", "n[1-4]", "train.py")
		if code != 0 || strings.Contains(out, "lost") {
			t.Errorf("a fixed --nnodes 4:4 is not elastic: exit %d\n%s", code, out)
		}
		code, out, _ = runCLI(t, "--dry-run", "--nnodes", "4:5", "--hosts", "n[1-4]", "train.py")
		if code != 0 || !strings.Contains(out, "# n1 lost: 3 hosts left, fewer than MIN 4: the job stops") {
			t.Errorf("exit %d\n%s", code, out)
		}
	})
}

// TestResumeWarnings (issue 30): an elastic Megatron-LM or DeepSpeed job
// that names nothing to resume from is warned that a restart begins at
// step 0; one that does, or a plain torch job, is not.
func TestResumeWarnings(t *testing.T) {
	for _, tc := range []struct {
		fw   parallel.Framework
		args []string
		warn bool
	}{
		{parallel.FrameworkMegatron, []string{"--num-layers", "2"}, true},
		{parallel.FrameworkMegatron, []string{"--save", "/c"}, false},
		{parallel.FrameworkMegatron, []string{"--load=/c"}, false},
		{parallel.FrameworkDeepSpeed, []string{"--deepspeed_config", "ds.json"}, true},
		{parallel.FrameworkDeepSpeed, []string{"--deepspeed_config", "ds.json", "--checkpoint-dir", "/c"}, false},
		{parallel.FrameworkDeepSpeed, []string{"--output_dir", "out"}, false},
		{parallel.FrameworkTorch, nil, false},
	} {
		if got := resumeWarnings(tc.fw, tc.args); (len(got) > 0) != tc.warn {
			t.Errorf("%s %v: warnings %q, want warned %v", tc.fw, tc.args, got, tc.warn)
		}
	}
}

// TestAbbreviatedFlags (issue 30): `--nnode=2` (HF's DeepSpeed docs) is
// torchrun's --nnodes through argparse's prefixes, so it is ours too.
func TestAbbreviatedFlags(t *testing.T) {
	code, out, errOut := runCLI(t, "--dry-run", "--nnode=2", "--nproc_per=2", "--hosts", "n[1-4]", "train.py")
	if code != 0 || !strings.Contains(out, "4 ranks on 2 host(s)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestLocalRankFromScript (issue 30): a line converted from `python -m
// torch.distributed.launch` without --as, whose script declares
// --local_rank with argparse and never reads LOCAL_RANK, gets
// --local_rank=N as that launcher gave it, and the output says so; a
// script that reads LOCAL_RANK, or --as torchrun, does not.
func TestLocalRankFromScript(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write("old.py", "import argparse\np = argparse.ArgumentParser()\np.add_argument('--local_rank', type=int, default=-1)\nargs = p.parse_args()\n")
	env := write("env.py", "import argparse, os\np = argparse.ArgumentParser()\np.add_argument(\"--local-rank\", type=int, default=int(os.environ['LOCAL_RANK']))\n")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--nproc_per_node", "2", old}, true},
		{[]string{"--nproc_per_node", "2", env}, false},
		{[]string{"--as", "torchrun", "--nproc_per_node", "2", old}, false},
		{[]string{"--use_env", "--nproc_per_node", "2", old}, false},
	} {
		code, out, errOut := runCLI(t, append([]string{"--dry-run", "--hosts", "localhost"}, tc.args...)...)
		got := strings.Contains(out, old+" --local_rank=1") || strings.Contains(out, old+" --local_rank=0")
		noted := strings.Contains(out, "declares --local_rank with argparse and never reads LOCAL_RANK")
		if code != 0 || got != tc.want || noted != tc.want {
			t.Errorf("%v: exit %d, --local_rank passed %v, noted %v; want %v\nstdout:\n%s\nstderr:\n%s", tc.args, code, got, noted, tc.want, out, errOut)
		}
	}
}

// TestElasticRefusesPreflight (issue 30): --preflight is not run before an
// elastic job's attempts yet, so asking for it is refused, not ignored.
func TestElasticRefusesPreflight(t *testing.T) {
	code, _, errOut := runCLIWith(t, func(o *Options) { o.ProbeLaunch = noProbe }, "--preflight", "--nnodes", "1:2", "--hosts", "n[1-2]", "--no-check-script", "train.py")
	if code != 2 || !strings.Contains(errOut, "--preflight with --nnodes 1:2") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// sickProbe is a launch probe whose answer from host sick says the
// interface the job's traffic takes (eth0) is down in sysfs.
func sickProbe(sick string) func(context.Context, []remote.HostTarget, int, string, *Options) (*launchprobe.Result, *remote.Pool, error) {
	return func(_ context.Context, targets []remote.HostTarget, _ int, _ string, _ *Options) (*launchprobe.Result, *remote.Pool, error) {
		lp := &launchprobe.Result{MasterAddr: "198.18.0.11"}
		for _, t := range targets {
			link := probe.NIC{Type: cluster.NICEthernet, Name: "eth0", Netdev: "eth0", State: "up", Active: true}
			if t.Name == sick {
				link.State, link.Active = "down", false
			}
			lp.Hosts = append(lp.Hosts, launchprobe.HostRoute{Target: t.String(), Hostname: t.Name, Ifname: "eth0", Links: []probe.NIC{link}})
		}
		return lp, nil, nil
	}
}

// TestHealthCheckBeforeAStart (issue 30, item 2): a host whose launch
// probe finds the job's interface down in sysfs fails its health check:
// an elastic job leaves it out before starting (no restart spent), a
// fixed-size one does not start, naming the host and the link.
func TestHealthCheckBeforeAStart(t *testing.T) {
	var started [][]string
	f := &fakes{probe: sickProbe("n2"), launch: func(_ context.Context, j *job.Job, _ *Options) error {
		var hosts []string
		for _, h := range j.Hosts {
			hosts = append(hosts, h.Name)
		}
		started = append(started, hosts)
		return nil
	}}
	code, _, errOut := runCLIWith(t, f.adjust, "--nnodes", "1:2", "--hosts", "n[1-2]", "--rejoin-interval", "0", "--no-check-script", "train.py")
	if code != 0 || fmt.Sprint(started) != "[[n1]]" {
		t.Fatalf("exit %d, attempts on %v; want 0 and [[n1]]\n%s", code, started, errOut)
	}
	if want := "left out   : n2 failed its check: health check: link eth0 is down (state down, from sysfs)"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	started = nil
	code, _, errOut = runCLIWith(t, f.adjust, "--hosts", "n[1-2]", "--no-check-script", "train.py")
	if code != 1 || started != nil || !strings.Contains(errOut, "health check: link eth0 is down") || !strings.Contains(errOut, "n2") {
		t.Errorf("fixed size: exit %d, started %v; want 1, none, naming n2's link\n%s", code, started, errOut)
	}
}
