package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/urfave/cli/v2"
)

func planOpts(out *bytes.Buffer, mod func(*Options)) *Options {
	o := &Options{IO: &cmdutil.IOStreams{Out: out, ErrOut: out}, Model: "gpt3-13b", GlobalBatch: 256, Top: 3, Seed: 1, Framework: "megatron"}
	o.Fixed.ZeroStage = -1
	if mod != nil {
		mod(o)
	}
	return o
}

func TestPlanTableDefaultCluster(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Run(planOpts(&out, func(o *Options) { o.Breakdown = true })); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"gpt3-13b", "RANK", "TFLOP/s/GPU", "LAYERS/STAGE", "breakdown:", "COMPUTE s", "ACTIVATIONS"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "\n1 ") || strings.Contains(s, "naive") {
		t.Fatalf("want a rank-1 row and no naive row on a one-island cluster:\n%s", s)
	}
}

// Issue 22: plan says which attention kernel it priced (JSON too).
func TestPlanSaysAttentionKernel(t *testing.T) {
	var out bytes.Buffer
	if err := Run(planOpts(&out, func(o *Options) {})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "assumes: attention priced as a fused flash-attention kernel") {
		t.Fatalf("plan does not say which attention it priced:\n%s", out.String())
	}
	out.Reset()
	if err := Run(planOpts(&out, func(o *Options) { o.JSON = true })); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Assumptions []string `json:"assumptions"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Assumptions) == 0 || !strings.Contains(doc.Assumptions[0], "flash-attention") {
		t.Fatalf("JSON assumptions %q (err %v)", doc.Assumptions, err)
	}
}

func TestPlanJSONKeys(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Run(planOpts(&out, func(o *Options) { o.JSON = true })); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	model := doc["model"].(map[string]any)
	if model["name"] != "gpt3-13b" || model["parameters"].(float64) < 12e9 {
		t.Fatalf("model %v", model)
	}
	plans := doc["plans"].([]any)
	if len(plans) == 0 || len(plans) > 3 {
		t.Fatalf("%d plans, want 1..3", len(plans))
	}
	p := plans[0].(map[string]any)
	for _, k := range []string{"tp", "pp", "dp", "cp", "vpp", "micro_batch_size", "global_batch_size", "num_micro_batches",
		"sequence_parallel", "recompute", "zero_stage", "distributed_optimizer", "offload", "stage_layers", "predicted", "memory", "placement"} {
		if _, ok := p[k]; !ok {
			t.Errorf("plan lacks %q", k)
		}
	}
	sub := func(m map[string]any, key string, keys ...string) {
		x, ok := m[key].(map[string]any)
		if !ok {
			t.Fatalf("%q is not an object", key)
		}
		for _, k := range keys {
			if _, ok := x[k]; !ok {
				t.Errorf("%s lacks %q", key, k)
			}
		}
	}
	sub(p, "offload", "optimizer_fraction", "params")
	sub(p, "predicted", "iteration_seconds", "tokens_per_second", "tflops_per_gpu", "bubble_fraction", "breakdown_seconds")
	sub(p["predicted"].(map[string]any), "breakdown_seconds", "compute", "tp", "pp", "dp", "offload")
	sub(p, "memory", "peak_bytes_per_gpu", "gpu_capacity_bytes", "host_bytes_per_node", "breakdown_bytes")
	sub(p["memory"].(map[string]any), "breakdown_bytes", "weights", "gradients", "optimizer", "activations", "other")
	pl := p["placement"].([]any)
	if len(pl) != 32 {
		t.Fatalf("placement has %d ranks, want 32 (4 hosts x 8)", len(pl))
	}
	for _, k := range []string{"rank", "host", "local_rank", "gpu"} {
		if _, ok := pl[0].(map[string]any)[k]; !ok {
			t.Errorf("placement entry lacks %q", k)
		}
	}
}

func TestPlanTwoIslandsHasNaiveRow(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := Run(planOpts(&out, func(o *Options) {
		o.ClusterFile = "../../../examples/two-clusters.yaml"
		o.Model = "llama3-8b"
		o.GlobalBatch = 64
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nnaive ") {
		t.Fatalf("no naive comparison row:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}

func TestPlanBadInputExits2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("clusters: [ {name: a, hosts: \n"), 0o644)
	badModel := filepath.Join(dir, "m.yaml")
	os.WriteFile(badModel, []byte("name: x\nnum_layers: -4\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 128\nvocab_size: 100\n"), 0o644)
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"unknown preset", func(o *Options) { o.Model = "gpt9-1t" }, "gpt9-1t"},
		{"no model", func(o *Options) { o.Model = "" }, "--model"},
		{"no batch", func(o *Options) { o.GlobalBatch = 0 }, "--global-batch-size"},
		{"framework", func(o *Options) { o.Framework = "jax" }, "--framework"},
		{"missing cluster", func(o *Options) { o.ClusterFile = filepath.Join(dir, "nope.yaml") }, "--cluster"},
		{"malformed cluster", func(o *Options) { o.ClusterFile = badYAML }, "bad.yaml"},
		{"negative layers", func(o *Options) { o.Model = badModel }, "num_layers"},
		{"negative tp", func(o *Options) { o.Fixed.TP = -2 }, "--tp"},
		{"tp not dividing heads", func(o *Options) { o.Fixed.TP = 3 }, "heads"},
		{"recompute", func(o *Options) { o.Fixed.Recompute = "most" }, "--recompute"},
		{"seq", func(o *Options) { o.SeqLength = -1 }, "--seq-length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(planOpts(&out, tc.mod))
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Fatalf("error %v: want exit code 2", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func TestPlanNoFitExits3WithAdvice(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := Run(planOpts(&out, func(o *Options) { o.Model = "gpt3-175b"; o.GlobalBatch = 64; o.Fixed.NoOffload = true }))
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 3 {
		t.Fatalf("175B on 32 GPUs without offload: %v, want a no-fit error (exit 3)", err)
	}
	if !strings.Contains(err.Error(), "misses by") || !strings.Contains(err.Error(), "more GPUs") {
		t.Fatalf("no-fit error lacks the miss and advice: %v", err)
	}
}

func TestCompactLayers(t *testing.T) {
	t.Parallel()
	if got := search.CompactLayers([]int{26, 26, 22, 22, 7}); got != "26*2 22*2 7" {
		t.Fatalf("got %q", got)
	}
}

// The flags reach the options: run the command through a cli.App.
func TestPlanCommandFlags(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	app := &cli.App{Name: "pipette-launch", Commands: []*cli.Command{NewCmd(&cmdutil.IOStreams{Out: &out, ErrOut: &out})},
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "256", "--json",
		"--tp", "2", "--recompute", "full", "--top", "2", "--distributed-optimizer=false", "--seed", "3"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plans []struct {
			TP        int    `json:"tp"`
			Recompute string `json:"recompute"`
			DistOpt   bool   `json:"distributed_optimizer"`
		} `json:"plans"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	if len(doc.Plans) != 2 {
		t.Fatalf("%d plans, want --top 2", len(doc.Plans))
	}
	for _, p := range doc.Plans {
		if p.TP != 2 || p.Recompute != "full" || p.DistOpt {
			t.Fatalf("plan %+v ignores --tp 2 --recompute full --distributed-optimizer=false", p)
		}
	}
	err = app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "256", "--zero-stage", "7"})
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 2 {
		t.Fatalf("--zero-stage 7: %v, want exit 2", err)
	}
}

// tables returns every table in the output: a block of lines from a header
// starting with "RANK" to the next blank line.
func tables(out string) [][]string {
	var blocks [][]string
	var cur []string
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "RANK "):
			cur = []string{line}
		case cur != nil && strings.TrimSpace(line) == "":
			blocks, cur = append(blocks, cur), nil
		case cur != nil:
			cur = append(cur, line)
		}
	}
	if cur != nil {
		blocks = append(blocks, cur)
	}
	return blocks
}

// columnStarts are the offsets where a cell begins: cells are separated by
// at least two spaces (tabwriter padding) and contain single spaces only.
func columnStarts(line string) []int {
	var starts []int
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' && (i == 0 || (i >= 2 && line[i-1] == ' ' && line[i-2] == ' ')) {
			starts = append(starts, i)
		}
	}
	return starts
}

func cells(line string) []string {
	var out []string
	for _, c := range strings.Split(line, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// TestPlanTablesAligned: every row of every table starts its cells at the
// header's column offsets, with and without --breakdown, and the breakdown
// table has one row per row of the ranked table.
func TestPlanTablesAligned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"default cluster", func(o *Options) {}},
		{"default cluster, breakdown", func(o *Options) { o.Breakdown = true }},
		{"small offload, breakdown", func(o *Options) {
			o.ClusterFile, o.GlobalBatch, o.Top, o.Breakdown = "../../../examples/small-offload.yaml", 64, 5, true
		}},
		{"two islands (naive row), breakdown", func(o *Options) {
			o.ClusterFile, o.Model, o.GlobalBatch, o.Breakdown = "../../../examples/two-clusters.yaml", "llama3-8b", 64, true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			opts := planOpts(&out, tc.mod)
			if err := Run(opts); err != nil {
				t.Fatal(err)
			}
			blocks := tables(out.String())
			want := 1
			if opts.Breakdown {
				want = 2
			}
			for _, b := range blocks {
				head := columnStarts(b[0])
				for _, row := range b[1:] {
					if got := columnStarts(row); !slices.Equal(got, head) {
						t.Errorf("row %q: cells start at %v, header at %v", row, got, head)
					}
				}
			}
			if len(blocks) != want {
				t.Fatalf("%d tables, want %d:\n%s", len(blocks), want, out.String())
			}
			if want == 2 {
				if len(blocks[0]) != len(blocks[1]) {
					t.Fatalf("breakdown has %d rows, ranked table %d", len(blocks[1]), len(blocks[0]))
				}
				for i := range blocks[0] {
					if a, b := cells(blocks[0][i])[0], cells(blocks[1][i])[0]; a != b {
						t.Errorf("row %d: ranked table %q, breakdown %q", i, a, b)
					}
				}
			}
		})
	}
}

// TestPlanShowsWhyOffload: the table says why plan 1 does or does not
// offload (issue 6), and the OFFLOAD cell carries the seconds offload adds.
func TestPlanShowsWhyOffload(t *testing.T) {
	t.Parallel()
	offloadCell := regexp.MustCompile(`^opt \d+%(\+params)? \((\d+\.\d\d)s\)$`)
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		// line is the start of the explanation; row the extra table row's label ("" = none).
		line, row  string
		firstOffld bool
	}{
		{"13B on 4x40GB, megatron", func(o *Options) { o.ClusterFile, o.GlobalBatch = "../../../examples/small-offload.yaml", 64 },
			"best without offload: does not fit: the closest (TP", "", true},
		{"13B on 4x40GB, deepspeed", func(o *Options) {
			o.ClusterFile, o.GlobalBatch, o.Framework = "../../../examples/small-offload.yaml", 64, "deepspeed"
		}, "best without offload: does not fit: the closest (TP", "", true},
		{"13B on the example cluster", func(o *Options) {}, `best with offload (row "offload"): `, "offload", false},
		{"--no-offload", func(o *Options) { o.Fixed.NoOffload = true }, "best with offload: not tried (--no-offload)", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Run(planOpts(&out, tc.mod)); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if !strings.Contains(s, "\n"+tc.line) {
				t.Fatalf("no line starting %q:\n%s", tc.line, s)
			}
			rows := map[string][]string{}
			for _, r := range tables(s)[0][1:] {
				c := cells(r)
				rows[c[0]] = c
			}
			const offloadCol = 11 // after RANK TP PP DP CP VPP MB SP RECOMPUTE OPTIMIZER
			if m := offloadCell.FindStringSubmatch(rows["1"][offloadCol-1]); (m != nil) != tc.firstOffld {
				t.Errorf("plan 1 OFFLOAD cell %q, want offload=%v with its seconds", rows["1"][offloadCol-1], tc.firstOffld)
			} else if m != nil && m[2] == "0.00" {
				t.Errorf("plan 1 offloads in 0.00 s")
			}
			if tc.row == "" {
				if _, ok := rows["offload"]; ok {
					t.Errorf("unexpected offload row:\n%s", s)
				}
				return
			}
			r, ok := rows[tc.row]
			if !ok {
				t.Fatalf("no %q row:\n%s", tc.row, s)
			}
			if m := offloadCell.FindStringSubmatch(r[offloadCol-1]); m == nil || m[2] == "0.00" {
				t.Errorf("%q row OFFLOAD cell %q, want its (non-zero) seconds", tc.row, r[offloadCol-1])
			}
			var alt, first float64
			line := s[strings.Index(s, tc.line)+len(tc.line):]
			if _, err := fmt.Sscanf(line, "%f s/iteration", &alt); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			fmt.Sscanf(rows["1"][12], "%f", &first) // ITER s
			if alt <= first || !strings.Contains(line[:strings.Index(line, "\n")], "s is offload") {
				t.Errorf("best with offload %g s not slower than plan 1's %g s, or no offload seconds: %q", alt, first, line)
			}
		})
	}
}

// TestPlanJSONComparison: --json carries the comparison under a new key;
// a 13B model on one 4 x 40GB host does not fit without offload.
func TestPlanJSONComparison(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Run(planOpts(&out, func(o *Options) {
		o.ClusterFile, o.GlobalBatch, o.JSON = "../../../examples/small-offload.yaml", 64, true
	})); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plans      []json.RawMessage `json:"plans"`
		Comparison struct {
			Without struct {
				Considered int  `json:"considered"`
				Fits       bool `json:"fits"`
				Miss       *struct {
					Memory    string  `json:"memory"`
					Stage     *int    `json:"stage"`
					MissBytes float64 `json:"miss_bytes"`
				} `json:"miss"`
			} `json:"best_without_offload"`
			With struct {
				Fits             bool            `json:"fits"`
				IterationSeconds float64         `json:"iteration_seconds"`
				OffloadSeconds   float64         `json:"offload_seconds"`
				Plan             json.RawMessage `json:"plan"`
			} `json:"best_with_offload"`
		} `json:"comparison"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	w, wo := doc.Comparison.With, doc.Comparison.Without
	if wo.Considered == 0 || wo.Fits || wo.Miss == nil || wo.Miss.Memory != "gpu" || wo.Miss.Stage == nil || wo.Miss.MissBytes <= 0 {
		t.Errorf("best_without_offload %+v: want a GPU-memory miss", wo)
	}
	if !w.Fits || w.IterationSeconds <= 0 || w.OffloadSeconds <= 0 || len(w.Plan) == 0 || len(doc.Plans) == 0 {
		t.Errorf("best_with_offload %+v: want plan 1's figures", w)
	}
}

// --sequence-parallel on|off|auto: plan honours it and the table says it;
// run's flag must agree with the script's own --sequence-parallel.
func TestSequenceParallelFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want string
	}{{"off", "off"}, {"on", "on"}, {"auto", "on"}} {
		var out, errb bytes.Buffer
		opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &errb}, Model: "gpt3-13b", GlobalBatch: 64, Top: 3, Framework: "megatron",
			Fixed: parallel.Constraints{TP: 8, ZeroStage: -1}}
		sp, err := cmdutil.ParseSequenceParallel(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		opts.Fixed.SequenceParallel = sp
		if err := Run(opts); err != nil {
			t.Fatalf("%s: %v", tc.v, err)
		}
		rows := tables(out.String())[0]
		if h := cells(rows[0]); h[7] != "SP" {
			t.Fatalf("header %v: no SP column", h)
		}
		for _, r := range rows[1:] {
			if c := cells(r); c[0] != "naive" && c[7] != tc.want {
				t.Fatalf("--sequence-parallel %s: row %v has SP %q", tc.v, c, c[7])
			}
		}
	}
	if _, err := cmdutil.ParseSequenceParallel("maybe"); err == nil {
		t.Fatal("--sequence-parallel maybe accepted")
	}
}

// plan --schedules prints plan 1 re-priced per schedule; the wave row says
// it cannot be launched, and the ranked plans (what run renders) are the
// same as without the flag.
func TestPlanWhatIfSchedules(t *testing.T) {
	t.Parallel()
	run := func(schedules []string) string {
		var out, errb bytes.Buffer
		opts := &Options{IO: &cmdutil.IOStreams{Out: &out, ErrOut: &errb}, Model: "gpt3-13b", GlobalBatch: 64, Top: 3, Framework: "megatron",
			Fixed: parallel.Constraints{PP: 4, VPP: 1, ZeroStage: -1}, Schedules: schedules}
		if err := Run(opts); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	plain := run(nil)
	out := run([]string{"1f1b", "interleaved", "wave"})
	if !strings.HasPrefix(out, plain) {
		t.Fatalf("--schedules changed the ranked table:\n%s\nvs\n%s", out, plain)
	}
	tail := strings.TrimPrefix(out, plain)
	t.Log(tail)
	lines := strings.Split(strings.TrimSpace(tail), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "SCHEDULE ") {
		t.Fatalf("want a what-if title, header and 3 rows:\n%s", tail)
	}
	for i, want := range []string{"1f1b", "interleaved", "wave"} {
		c := cells(lines[i+2])
		if c[0] != want || c[2] == "-" {
			t.Errorf("row %d: %v, want %s priced", i, c, want)
		}
		launch := strings.Join(c[5:], " ")
		if (want == "wave") != strings.HasPrefix(launch, "no (not launchable with Megatron-LM/DeepSpeed") {
			t.Errorf("row %s: launchable %q", want, launch)
		}
	}
	var errb bytes.Buffer
	app := testApp(&cmdutil.IOStreams{Out: &bytes.Buffer{}, ErrOut: &errb})
	err := app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "64", "--schedules", "1f1b,chimera"})
	if code := cmdtest.ExitCode(err); code != 2 || !strings.Contains(err.Error(), `"chimera"`) {
		t.Fatalf("--schedules chimera: exit %d, %v", code, err)
	}
}

// testApp is the CLI with plan as its only command.
func testApp(io *cmdutil.IOStreams) *cli.App {
	p := NewCmd(io)
	return cmdutil.NewApp(io, p, p)
}

// runAppBuffers runs plan's CLI where the test is.
func runAppBuffers(args ...string) (code int, stdout, stderr string) {
	return cmdtest.Run(testApp, args...)
}

// runCLI runs plan's CLI in the shared testdata with a clean environment.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cmdtest.RunInTestdata(t, testApp, args...)
}
