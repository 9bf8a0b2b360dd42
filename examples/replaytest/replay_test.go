package replaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// python is Debian's interpreter: python3-torch installs there, and a
// python3 found first on PATH may lack torch (see testbed.md).
const python = "/usr/bin/python3"

var script = filepath.Join("..", "replay_plan.py")

// result is the JSON line rank 0 prints last.
type result struct {
	MedianStepSeconds float64   `json:"median_step_seconds"`
	Steps             []float64 `json:"steps"`
	World             int       `json:"world"`
	TP                int       `json:"tp"`
	PP                int       `json:"pp"`
	DP                int       `json:"dp"`
}

// requireTorch fails (never skips) when the interpreter cannot run gloo.
func requireTorch(t *testing.T) {
	t.Helper()
	out, err := exec.Command(python, "-c",
		"import torch.distributed as d; assert d.is_available() and d.is_gloo_available()").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import torch.distributed with gloo (%v): %s\n"+
			"install Debian's torch: apt-get install python3-torch", python, err, out)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// rankEnv is what torchrun gives a worker, with gloo pinned to loopback so
// no traffic leaves the machine.
func rankEnv(rank, world, port int) []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"RANK=" + strconv.Itoa(rank),
		"WORLD_SIZE=" + strconv.Itoa(world),
		"LOCAL_RANK=" + strconv.Itoa(rank),
		"MASTER_ADDR=127.0.0.1",
		"MASTER_PORT=" + strconv.Itoa(port),
		"GLOO_SOCKET_IFNAME=lo",
		"OMP_NUM_THREADS=1",
	}
}

type rankRun struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

// runJob starts tp*pp*dp ranks of the script on loopback and waits for all;
// it fails the test, with each failed rank's output, unless all exit 0.
func runJob(t *testing.T, tp, pp, dp int, args ...string) (result, []string) {
	t.Helper()
	world := tp * pp * dp
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	port := freePort(t)
	jsonOut := filepath.Join(t.TempDir(), "result.json")
	argv := append([]string{script, "--tp", strconv.Itoa(tp), "--pp", strconv.Itoa(pp),
		"--dp", strconv.Itoa(dp), "--json-out", jsonOut, "--timeout-s", "60"}, args...)
	ranks := make([]*rankRun, world)
	for r := range ranks {
		rr := &rankRun{cmd: exec.CommandContext(ctx, python, argv...)}
		rr.cmd.Env = rankEnv(r, world, port)
		rr.cmd.Stdout, rr.cmd.Stderr = &rr.stdout, &rr.stderr
		if err := rr.cmd.Start(); err != nil {
			t.Fatalf("start rank %d: %v", r, err)
		}
		ranks[r] = rr
	}
	var failed []string
	for r, rr := range ranks {
		if err := rr.cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("rank %d: %v\nstdout:\n%s\nstderr:\n%s", r, err, rr.stdout.String(), rr.stderr.String()))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("replay job %v failed:\n%s", argv, strings.Join(failed, "\n"))
	}
	lines := make([]string, world)
	for r, rr := range ranks {
		lines[r] = rr.stdout.String()
	}
	res := parseResult(t, lines[0])
	file, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatalf("rank 0 wrote no --json-out: %v", err)
	}
	if fromFile := parseResult(t, string(file)); fromFile.MedianStepSeconds != res.MedianStepSeconds {
		t.Errorf("--json-out median %v differs from stdout's %v", fromFile.MedianStepSeconds, res.MedianStepSeconds)
	}
	return res, lines
}

// parseResult decodes the last line starting with '{'.
func parseResult(t *testing.T, out string) result {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "{") {
		t.Fatalf("rank 0's last line is not JSON: %q\nfull output:\n%s", last, out)
	}
	var res result
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("rank 0's JSON line %q: %v", last, err)
	}
	return res
}

// megatronGroups computes, independently of the script, the groups of the
// default order tp-cp-ep-dp-pp: global = tp + dp*T + pp*T*D.
func megatronGroups(rank, tp, dp, pp int) (tpGroup, dpGroup, prev, next string) {
	t, d, p := rank%tp, rank/tp%dp, rank/(tp*dp)
	var tg, dg []string
	for i := 0; i < tp; i++ {
		tg = append(tg, strconv.Itoa(i+d*tp+p*tp*dp))
	}
	for i := 0; i < dp; i++ {
		dg = append(dg, strconv.Itoa(t+i*tp+p*tp*dp))
	}
	prev, next = "-", "-"
	if p > 0 {
		prev = strconv.Itoa(rank - tp*dp)
	}
	if p < pp-1 {
		next = strconv.Itoa(rank + tp*dp)
	}
	return strings.Join(tg, ","), strings.Join(dg, ","), prev, next
}

// rankFields parses the "replay: rank=..." line into key=value pairs.
func rankFields(t *testing.T, rank int, out string) map[string]string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "replay: ") {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.Fields(strings.TrimPrefix(line, "replay: ")) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		return f
	}
	t.Fatalf("rank %d printed no 'replay: rank=...' line:\n%s", rank, out)
	return nil
}

// checkGroups compares every rank's printed groups with megatronGroups.
func checkGroups(t *testing.T, lines []string, tp, pp, dp int) {
	t.Helper()
	for r, out := range lines {
		f := rankFields(t, r, out)
		tg, dg, prev, next := megatronGroups(r, tp, dp, pp)
		want := map[string]string{"rank": strconv.Itoa(r), "tp_group": tg, "dp_group": dg, "pp_prev": prev, "pp_next": next}
		for k, v := range want {
			if f[k] != v {
				t.Errorf("rank %d: %s=%q, want %q (Megatron order tp-cp-ep-dp-pp)", r, k, f[k], v)
			}
		}
	}
}

const computeMS = 60

func commonArgs(tpBytes, ppBytes, dpBytes int) []string {
	return []string{"--micro-batches", "4", "--compute-ms", strconv.Itoa(computeMS),
		"--steps", "3", "--warmup", "1",
		"--tp-bytes", strconv.Itoa(tpBytes), "--pp-bytes", strconv.Itoa(ppBytes), "--dp-bytes", strconv.Itoa(dpBytes)}
}

// TestReplayTP2PP2DP2 runs 8 ranks twice: tiny messages, then messages of
// megabytes. It checks Megatron's groups on every rank, that a step never
// beats its compute, and that moving more bytes costs time (a replay that
// skipped its traffic would fail here).
func TestReplayTP2PP2DP2(t *testing.T) {
	requireTorch(t)
	const tp, pp, dp = 2, 2, 2

	small, lines := runJob(t, tp, pp, dp, commonArgs(4, 4, 4)...)
	if small.World != 8 || small.TP != tp || small.PP != pp || small.DP != dp {
		t.Errorf("JSON sizes world=%d tp=%d pp=%d dp=%d, want 8 %d %d %d", small.World, small.TP, small.PP, small.DP, tp, pp, dp)
	}
	if len(small.Steps) != 3 {
		t.Errorf("JSON has %d steps, want 3 (--steps 3, warmup excluded)", len(small.Steps))
	}
	checkGroups(t, lines, tp, pp, dp)
	// 1F1B: every stage sleeps the whole compute of a step, so no step is
	// shorter; the pipeline adds a bubble of (P-1)/M on top.
	floor := float64(computeMS) / 1000
	if small.MedianStepSeconds <= floor {
		t.Errorf("median step %.4fs is not above the compute of a step %.3fs", small.MedianStepSeconds, floor)
	}

	big, _ := runJob(t, tp, pp, dp, commonArgs(8<<20, 8<<20, 32<<20)...)
	t.Logf("median step: tiny messages %.4fs, MB messages %.4fs (%.2fx)",
		small.MedianStepSeconds, big.MedianStepSeconds, big.MedianStepSeconds/small.MedianStepSeconds)
	// Each step moves 16 TP all-reduces and 8 activation/gradient sends of
	// 8 MiB per rank plus a 32 MiB DP all-reduce: at any loopback speed that
	// is well over a quarter of a 60 ms step (about 10x on a 2-core VM).
	if big.MedianStepSeconds < 1.25*small.MedianStepSeconds {
		t.Errorf("median step with MB messages %.4fs is not clearly slower than with 4-byte messages %.4fs",
			big.MedianStepSeconds, small.MedianStepSeconds)
	}
}

// TestReplayDeepPipelineWaitsForNeighbours: with 4 stages and 2
// micro-batches (fewer than stages), 1F1B cannot beat its dependency chain,
// (M+P-1) * (F+B) = 5 * (10+20) ms = 150 ms, whatever the overhead. Stages
// that did not wait for their neighbours would take about 60 ms.
func TestReplayDeepPipelineWaitsForNeighbours(t *testing.T) {
	requireTorch(t)
	const tp, pp, dp, micro = 1, 4, 1, 2
	args := []string{"--micro-batches", strconv.Itoa(micro), "--compute-ms", strconv.Itoa(computeMS),
		"--steps", "3", "--warmup", "1", "--tp-bytes", "4", "--pp-bytes", "4", "--dp-bytes", "4",
		// Megatron's flags, as a launcher plans and renders them, are accepted.
		"--num-layers", "24", "--micro-batch-size", "1", "--pipeline-model-parallel-layout", "Et*6|t*6|t*6|t*6L", "--bf16"}
	res, lines := runJob(t, tp, pp, dp, args...)
	checkGroups(t, lines, tp, pp, dp)
	floor := float64(computeMS) / 1000 * float64(micro+pp-1) / micro
	if res.MedianStepSeconds < floor {
		t.Errorf("median step %.4fs is below the pipeline's dependency chain %.3fs: stages did not wait for each other",
			res.MedianStepSeconds, floor)
	}
}

// TestReplayBadInput: bad sizes or a missing launcher environment exit 2
// with a message naming the input, before any rank waits for the others.
func TestReplayBadInput(t *testing.T) {
	requireTorch(t)
	good := map[string]string{"tp": "2", "pp": "1", "dp": "1", "cp": "1"}
	cases := []struct {
		name     string
		override map[string]string
		env      []string
		wantMsg  string
	}{
		{"world mismatch", nil, rankEnv(0, 3, 1), "WORLD_SIZE=3 but --tp 2 x --pp 1 x --dp 1 x --cp 1 = 2"},
		{"zero tp", map[string]string{"tp": "0"}, rankEnv(0, 2, 1), "--tp must be at least 1"},
		{"cp not replayed", map[string]string{"cp": "2"}, rankEnv(0, 4, 1), "only --cp 1 is replayed"},
		{"no launcher env", nil, []string{"PATH=/usr/bin:/bin"}, "environment variable RANK is not set"},
		{"rank out of range", nil, rankEnv(5, 2, 1), "RANK=5 is outside 0..WORLD_SIZE-1"},
		{"other rank order", map[string]string{"use-tp-pp-dp-mapping": ""}, rankEnv(0, 2, 1), "only Megatron's default order"},
		{"misspelt flag", map[string]string{"num-layer": "24"}, rankEnv(0, 2, 1), "unrecognized arguments: --num-layer 24"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			argv := []string{script}
			for _, k := range []string{"tp", "pp", "dp", "cp"} {
				v := good[k]
				if o, ok := tc.override[k]; ok {
					v = o
				}
				argv = append(argv, "--"+k, v)
			}
			argv = append(argv, commonArgs(4, 4, 4)...)
			for k, v := range tc.override { // flags beyond the sizes; "" = a switch
				if _, size := good[k]; !size {
					argv = append(argv, "--"+k)
					if v != "" {
						argv = append(argv, v)
					}
				}
			}
			cmd := exec.Command(python, argv...)
			cmd.Env = tc.env
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit %v, want status 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.wantMsg) {
				t.Errorf("output %q does not contain %q", out, tc.wantMsg)
			}
		})
	}
}
