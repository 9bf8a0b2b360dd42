package crosscluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const python = "/usr/bin/python3"

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s is missing (%v): install Debian's python3 (apt-get install python3-torch brings it)", python, err)
	}
}

// runPy runs a helper script and returns its stdout, stderr and exit code.
func runPy(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(python, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// planJSON is the shape of `plan --json` that replay_sizes.py reads: a
// 1.2e9-parameter model of 24 layers, hidden 2048, sequence 1024.
// shapeArgs is that model and batch in Megatron's flags.
func planJSON(mutate func(plan, model map[string]any)) map[string]any {
	plan := map[string]any{
		"tp": 2, "pp": 2, "dp": 2, "cp": 1, "vpp": 1, "micro_batch_size": 1, "num_micro_batches": 16, "global_batch_size": 32,
		"sequence_parallel": false, "stage_layers": []int{12, 12},
		"placement": []map[string]any{{"rank": 0, "host": "a1"}, {"rank": 1, "host": "a1"}},
	}
	model := map[string]any{"name": "m", "parameters": 1200000000,
		"shape": map[string]any{"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 1024, "vocab_size": 50257}}
	if mutate != nil {
		mutate(plan, model)
	}
	return map[string]any{"model": model, "plans": []any{plan}}
}

// TestReplaySizes checks the plan-to-bytes arithmetic against hand-computed
// values: act = 1024*1*2048*2 = 4194304; 16 micro-batches replayed as 8
// doubles PP and TP messages; everything is divided by 64.
const shapeArgs = "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 1024 --vocab-size 50257 " +
	"--micro-batch-size 1 --global-batch-size 32 "

func TestReplaySizes(t *testing.T) {
	requirePython(t)
	cases := []struct {
		name     string
		mutate   func(plan, model map[string]any)
		args     []string
		want     string // stdout line; empty when an error is expected
		wantCode int
		wantErr  string
	}{
		{
			name: "tp2 pp2 dp2",
			// tp = act*12*2/64, pp = act*2/64, dp = 1.2e9*12/24/2*4/64
			want: shapeArgs + "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 8 " +
				"--tp-bytes 1572864 --pp-bytes 131072 --dp-bytes 18750000 --compute-ms 300",
		},
		{
			name:   "sequence parallel sends act/tp",
			mutate: func(p, _ map[string]any) { p["sequence_parallel"] = true },
			want: shapeArgs + "--sequence-parallel --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 8 " +
				"--tp-bytes 1572864 --pp-bytes 65536 --dp-bytes 18750000 --compute-ms 300",
		},
		{
			name: "uneven stages use the largest; few micro-batches kept; GQA and SwiGLU flags",
			mutate: func(p, m map[string]any) {
				p["stage_layers"] = []int{16, 8}
				p["num_micro_batches"], p["global_batch_size"] = 4, 8
				sh := m["shape"].(map[string]any)
				sh["num_query_groups"], sh["swiglu"], sh["ffn_hidden_size"] = 4, true, 5504
			},
			args: []string{"--scale", "1", "--compute-ms", "50"},
			// tp = act*16, pp = act, dp = 1.2e9*16/24/2*4
			want: "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --group-query-attention --num-query-groups 4 " +
				"--ffn-hidden-size 5504 --swiglu --seq-length 1024 --vocab-size 50257 --micro-batch-size 1 --global-batch-size 8 " +
				"--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 4 " +
				"--tp-bytes 67108864 --pp-bytes 4194304 --dp-bytes 1600000000 --compute-ms 50",
		},
		{
			name: "interleaved: a rank's virtual stages add up, each boundary crossed vpp times",
			mutate: func(p, _ map[string]any) {
				p["vpp"], p["stage_layers"], p["distributed_optimizer"] = 2, []int{6, 6, 5, 7}, true
			},
			// ranks hold stages {0,2} = 11 and {1,3} = 13 layers: tp = act*13*2/64,
			// pp = act*2(vpp)*2/64, dp = 1.2e9*13/24/2*4/64
			want: shapeArgs + "--num-virtual-stages-per-pipeline-rank 2 --use-distributed-optimizer " +
				"--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --dp 2 --micro-batches 8 " +
				"--tp-bytes 1703936 --pp-bytes 262144 --dp-bytes 20312500 --compute-ms 300",
		},
		{
			name:     "stage list does not match pp*vpp",
			mutate:   func(p, _ map[string]any) { p["vpp"] = 3 },
			wantCode: 2, wantErr: "plan has 2 stage_layers, want pp*vpp = 6",
		},
		{
			name:     "no model shape",
			mutate:   func(_, m map[string]any) { delete(m, "shape") },
			wantCode: 2, wantErr: "no model.shape",
		},
		{
			name:     "context parallel",
			mutate:   func(p, _ map[string]any) { p["cp"] = 2 },
			wantCode: 2, wantErr: "cp=2",
		},
		{
			name:     "index past the plans",
			args:     []string{"--index", "3"},
			wantCode: 2, wantErr: "plan index 3: the JSON has 1 plans",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pj := writeJSON(t, dir, "plan.json", planJSON(tc.mutate))
			placement := filepath.Join(dir, "placement")
			args := append([]string{"replay_sizes.py", pj, "--placement-out", placement}, tc.args...)
			stdout, stderr, code := runPy(t, args...)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.wantCode, stderr)
			}
			if tc.wantCode != 0 {
				if !strings.Contains(stderr, tc.wantErr) {
					t.Errorf("stderr %q does not contain %q", stderr, tc.wantErr)
				}
				return
			}
			if got := strings.TrimSpace(stdout); got != tc.want {
				t.Errorf("args\n got %s\nwant %s", got, tc.want)
			}
			b, err := os.ReadFile(placement)
			if err != nil || string(b) != "0 a1\n1 a1\n" {
				t.Errorf("placement file %q (%v), want the plan's rank-host pairs", b, err)
			}
			replayAccepts(t, strings.Fields(stdout))
		})
	}
}

// replayAccepts runs examples/replay_plan.py with args (plus the step
// counts run.sh adds) and a WORLD_SIZE of
// 3: it parses every argument first, so the world-size error (exit 2)
// proves it accepted them all, before any torch import or network use.
func replayAccepts(t *testing.T, args []string) {
	t.Helper()
	argv := append([]string{"../../examples/replay_plan.py"}, args...)
	cmd := exec.Command(python, append(argv, "--steps", "1", "--warmup", "0")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "RANK=0", "WORLD_SIZE=3", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "WORLD_SIZE=3 but --tp 2 x --pp 2 x --dp 2") {
		t.Errorf("replay_plan.py did not accept the arguments %q:\n%s", args, out)
	}
}

// replayLog writes what replay_plan.py's ranks print (behind a launcher's
// "host:rank" prefix) for TP2 PP2 DP2 with rank r on hosts[r].
func replayLog(t *testing.T, dir, name string, hosts []string, median float64) string {
	t.Helper()
	const tp, dp, pp = 2, 2, 2
	var b strings.Builder
	for r, h := range hosts {
		ti, di, pi := r%tp, r/tp%dp, r/(tp*dp)
		tg := fmt.Sprintf("%d,%d", di*tp+pi*tp*dp, 1+di*tp+pi*tp*dp)
		dg := fmt.Sprintf("%d,%d", ti+pi*tp*dp, ti+tp+pi*tp*dp)
		prev, next := "-", "-"
		if pi > 0 {
			prev = fmt.Sprint(r - tp*dp)
		}
		if pi < pp-1 {
			next = fmt.Sprint(r + tp*dp)
		}
		fmt.Fprintf(&b, "%s:%d replay: rank=%d local_rank=%d host=%s tp_rank=%d dp_rank=%d pp_rank=%d tp_group=%s dp_group=%s pp_prev=%s pp_next=%s\n",
			h, r%2, r, r%2, h, ti, di, pi, tg, dg, prev, next)
	}
	log := filepath.Join(dir, name+".log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	js := writeJSON(t, dir, name+".json", map[string]any{"median_step_seconds": median,
		"steps": []float64{median}, "world": len(hosts), "tp": tp, "pp": pp, "dp": dp})
	return name + "=" + log + ":" + js
}

// TestReport checks the crossing counts and the ratio verdict: with the
// hosts file a1 b1 a2 b2, the naive order puts every DP group across the
// islands, the planned one only the pipeline links.
func TestReport(t *testing.T) {
	requirePython(t)
	planned := []string{"a1", "a1", "a2", "a2", "b1", "b1", "b2", "b2"}
	naive := []string{"a1", "a1", "b1", "b1", "a2", "a2", "b2", "b2"}
	islands := "--islands=a1=A,a2=A,b1=B,b2=B"
	cases := []struct {
		name     string
		minRatio string
		naiveMed float64
		wantCode int
		wantOut  []string
	}{
		{"placement wins", "2", 7.7, 0, []string{
			"planned  median step 0.750 s", "crossing islands: 0 TP groups, 0 DP groups, 4 pipeline links",
			"crossing islands: 0 TP groups, 4 DP groups, 0 pipeline links", "ratio naive/planned: 10.27x (want >= 2: ok)"}},
		{"below the bar", "2", 1.2, 1, []string{"ratio naive/planned: 1.60x (want >= 2: BELOW)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := replayLog(t, dir, "planned", planned, 0.75)
			n := replayLog(t, dir, "naive", naive, tc.naiveMed)
			stdout, stderr, code := runPy(t, "report.py", islands, "--min-ratio", tc.minRatio, p, n)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, stdout, stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}

	t.Run("missing rank lines", func(t *testing.T) {
		dir := t.TempDir()
		p := replayLog(t, dir, "planned", planned[:7], 0.75) // world 7 but JSON says 7: make JSON disagree
		if err := os.WriteFile(strings.Split(strings.SplitN(p, "=", 2)[1], ":")[1], []byte(`{"median_step_seconds":1,"steps":[1],"world":8}`), 0o644); err != nil {
			t.Fatal(err)
		}
		n := replayLog(t, dir, "naive", naive, 1)
		_, stderr, code := runPy(t, "report.py", islands, p, n)
		if code != 2 || !strings.Contains(stderr, "has 7 'replay: rank=' lines, want world=8") {
			t.Errorf("exit %d stderr %q, want 2 and a message about the missing rank", code, stderr)
		}
	})
}
