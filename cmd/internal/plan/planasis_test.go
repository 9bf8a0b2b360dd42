package plan

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
)

// interleavedHostfile lists examples/two-clusters.yaml's hosts alternating
// between the islands (a hostfile sorted across clusters), DeepSpeed style.
func interleavedHostfile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(p, []byte("h100-01 slots=8\nl40s-01 slots=8\nh100-02 slots=8\nl40s-02 slots=8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// plan --as-is on two-clusters.yaml with an interleaved hostfile and the
// user's Megatron sizes (TP8 PP2): the text line, and --json whose as-is
// plan is the simulator's price of torchrun's order on that host order.
func TestPlanAsIsInterleavedHostfile(t *testing.T) {
	t.Parallel()
	hf := interleavedHostfile(t)
	args := []string{"plan", "--cluster", "../../../examples/two-clusters.yaml", "--model", "llama3-8b", "--global-batch-size", "64",
		"--hostfile", hf, "--as-is", "--top", "1", "--",
		"--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2", "--micro-batch-size", "1", "--bf16"}
	code, out, errOut := runAppBuffers(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	re := regexp.MustCompile(`your layout \(TP 8 PP 2 DP 2, torchrun's rank order on h100-01 l40s-01 h100-02 l40s-02\): ([0-9.]+) s/iteration; planned: ([0-9.]+) s \(([0-9.]+)x\)`)
	mt := re.FindStringSubmatch(out)
	if mt == nil {
		t.Fatalf("no as-is line:\n%s", out)
	}
	if !strings.Contains(out, "\nas-is ") {
		t.Fatalf("no as-is row in the table:\n%s", out)
	}
	ratio, _ := strconv.ParseFloat(mt[3], 64)
	if ratio <= 1 {
		t.Fatalf("as-is/planned %v: the interleaved order splits every DP group across the 25 Gbit/s link, want > 1", ratio)
	}
	t.Log(mt[0])

	code, js, errOut := runAppBuffers(append([]string{args[0], "--json"}, args[1:]...)...)
	if code != 0 {
		t.Fatalf("--json exit %d: %s", code, errOut)
	}
	var doc struct {
		Plans     []search.Plan `json:"plans"`
		AsIs      *search.Plan  `json:"as_is"`
		AsIsHosts []string      `json:"as_is_host_order"`
		Over      float64       `json:"as_is_over_planned"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.AsIs == nil || doc.AsIs.TP != 8 || doc.AsIs.PP != 2 || doc.AsIs.DP != 2 {
		t.Fatalf("as_is %+v, want TP8 PP2 DP2", doc.AsIs)
	}
	if strings.Join(doc.AsIsHosts, " ") != "h100-01 l40s-01 h100-02 l40s-02" {
		t.Fatalf("as_is_host_order %v", doc.AsIsHosts)
	}
	// Torchrun's order: rank r on the (r/8)-th host of the hostfile.
	for _, rp := range doc.AsIs.Placement {
		if rp.Host != doc.AsIsHosts[rp.Rank/8] || rp.LocalRank != rp.Rank%8 {
			t.Fatalf("rank %d on %s local %d, want torchrun's order", rp.Rank, rp.Host, rp.LocalRank)
		}
	}
	// The as-is figure is the simulator on that order.
	c, names, err := loadListedCluster("../../../examples/two-clusters.yaml", fabric.TransportAuto, "", hf)
	if err != nil {
		t.Fatal(err)
	}
	order, err := hostOrder(c, names)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.Preset("llama3-8b")
	sim, err := search.PriceOrder(c, m, doc.AsIs.Config, parallel.FrameworkMegatron, order)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := doc.AsIs.Predicted.IterationSeconds, sim.Predicted.IterationSeconds; math.Abs(got-want) > 1e-9*want {
		t.Fatalf("as-is %v s, simulator on the order %v s", got, want)
	}
	if got := doc.AsIs.Predicted.IterationSeconds / doc.Plans[0].Predicted.IterationSeconds; math.Abs(got-doc.Over) > 1e-9 {
		t.Fatalf("as_is_over_planned %v, figures say %v", doc.Over, got)
	}
}

// Without a hostfile the cluster file's own order is the user's layout;
// bad host lists are bad input naming what is wrong.
func TestPlanAsIsInputs(t *testing.T) {
	t.Parallel()
	code, out, errOut := runAppBuffers("plan", "--cluster", "../../../examples/two-clusters.yaml", "--model", "llama3-8b",
		"--global-batch-size", "64", "--as-is", "--top", "1", "--tp", "8")
	if code != 0 || !strings.Contains(out, "torchrun's rank order on h100-01 h100-02 l40s-01 l40s-02)") {
		t.Fatalf("exit %d, no as-is line in file order:\n%s%s", code, out, errOut)
	}
	hf := interleavedHostfile(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hosts", "h100-01,l40s-09", "--as-is"}, "l40s-09 are not in the cluster file"},
		{[]string{"--hosts", "h100-01", "--hostfile", hf}, "give one"},
		{[]string{"--as-is", "--hosts", "h100-01,h100-01"}, "listed twice"},
		{[]string{"--hosts", "h100-01:2222,h100-02", "--as-is", "--", "--tensor-model-parallel-size", "3"}, ""},
		{[]string{"--", "--tensor-model-parallel-size", "8"}, "add --as-is"},
	} {
		args := append([]string{"plan", "--cluster", "../../../examples/two-clusters.yaml", "--model", "llama3-8b", "--global-batch-size", "64"}, tc.args...)
		code, out, errOut := runAppBuffers(args...)
		if tc.want == "" { // TP 3 does not divide the heads: priced as not possible, plan still shown
			if code != 0 || !strings.Contains(out, "not priced") {
				t.Fatalf("%v: exit %d\n%s%s", tc.args, code, out, errOut)
			}
			continue
		}
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Fatalf("%v: exit %d, stderr %q, want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
	code, _, errOut = runAppBuffers("plan", "--model", "llama3-8b", "--global-batch-size", "64", "--hostfile", hf, "--as-is")
	if code != 2 || !strings.Contains(errOut, "--cluster") {
		t.Fatalf("--hostfile without a cluster file: exit %d %q", code, errOut)
	}
}

// A subset of a measured cluster file: the measured matrix keeps the
// listed hosts' rows and columns, and the order is the list's.
func TestRestrictToListedMeasured(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../bench/crosscluster/cluster-handwritten.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := cluster.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	names, err := restrictToListed(f, "node04,node01,node03", "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, " ") != "node04 node01 node03" {
		t.Fatalf("names %v", names)
	}
	if got := strings.Join(f.Measured.Hosts, " "); got != "node01 node03 node04" {
		t.Fatalf("measured hosts %q", got)
	}
	want := [][]float64{{0, 0.096, 0.096}, {0.096, 0, 14}, {0.096, 14, 0}}
	for i := range want {
		for j := range want[i] {
			if f.Measured.GbitPerS[i][j] != want[i][j] {
				t.Fatalf("measured %v, want %v", f.Measured.GbitPerS, want)
			}
		}
	}
	c, err := f.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	order, err := hostOrder(c, names)
	if err != nil || len(order) != 3 || c.Hosts[order[0]].Name != "node04" {
		t.Fatalf("order %v, %v", order, err)
	}
}

// Issue 22: plan --as-is prices the user's own layer split
// (--decoder-first/last-pipeline-num-layers), not an even one.
func TestPlanAsIsHonoursUnevenSplit(t *testing.T) {
	base := []string{"plan", "--json", "--cluster", "../../../examples/two-clusters.yaml", "--model", "llama3-8b", "--global-batch-size", "64",
		"--as-is", "--top", "1", "--", "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "4", "--micro-batch-size", "1", "--bf16"}
	asIs := func(extra ...string) *search.Plan {
		t.Helper()
		code, js, errOut := runAppBuffers(append(slices.Clone(base), extra...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var doc struct {
			AsIs *search.Plan `json:"as_is"`
		}
		if err := json.Unmarshal([]byte(js), &doc); err != nil || doc.AsIs == nil {
			t.Fatalf("no as_is plan (%v):\n%s", err, js)
		}
		return doc.AsIs
	}
	even := asIs()
	uneven := asIs("--decoder-first-pipeline-num-layers", "5", "--decoder-last-pipeline-num-layers", "9")
	if !slices.Equal(even.StageLayers, []int{8, 8, 8, 8}) || !slices.Equal(uneven.StageLayers, []int{5, 9, 9, 9}) {
		t.Fatalf("as-is stage layers %v and %v, want [8 8 8 8] and [5 9 9 9]", even.StageLayers, uneven.StageLayers)
	}
	if uneven.Predicted.IterationSeconds == even.Predicted.IterationSeconds {
		t.Fatalf("the uneven split is priced as the even one (%v s)", even.Predicted.IterationSeconds)
	}
}

// Issue 22: plan says which of the user's flags it passes through without
// pricing them. --tp-comm-overlap is priced (the layout gets faster), so
// it is not among them; without --sequence-parallel the layout is refused
// as Megatron-LM refuses it.
func TestPlanAsIsNamesUnpricedFlags(t *testing.T) {
	asIs := func(extra ...string) (string, float64) {
		t.Helper()
		return asIsLlama8B(t, "two-clusters.yaml", append([]string{"--log-interval", "10"}, extra...)...)
	}
	out, overlapped := asIs("--tp-comm-overlap", "--sequence-parallel")
	if !strings.Contains(out, "assumes: your layout's --log-interval passed through, not priced") {
		t.Fatalf("plan does not name the flags it passes through (or still lists --tp-comm-overlap):\n%s", out)
	}
	_, exposed := asIs("--sequence-parallel")
	if overlapped <= 0 || exposed <= 0 || overlapped >= exposed {
		t.Fatalf("as-is layout with --tp-comm-overlap %g s, without %g s: want both priced, the overlapped one faster", overlapped, exposed)
	}
	out, _ = asIs("--tp-comm-overlap")
	if !strings.Contains(out, "not priced") || !strings.Contains(out, "--tp-comm-overlap: needs --sequence-parallel") {
		t.Fatalf("--tp-comm-overlap without --sequence-parallel: want the layout refused naming both:\n%s", out)
	}
}

// --tp-comm-overlap-cfg is read and priced (issue 22): the userbuffers
// settings of a published configuration (NeMo launcher's 405B FP8 file,
// planner/megatron's testdata) price the same layout differently from
// Transformer Engine's defaults, the flag is not listed as passed through,
// and a file plan cannot read refuses the layout naming the flag.
func TestPlanAsIsReadsTPOverlapCfg(t *testing.T) {
	const ubFile = "../../../planner/megatron/tpoverlap/testdata/tp_overlap/ub_cfg_h100_fp8_h16384_tp8_cp2_mbs1_seqlen8192.yaml"
	asIs := func(extra ...string) (string, float64) {
		t.Helper()
		return asIsLlama8B(t, "cluster.yaml", append([]string{"--tp-comm-overlap", "--sequence-parallel"}, extra...)...)
	}
	_, defaults := asIs()
	out, given := asIs("--tp-comm-overlap-cfg", ubFile)
	if defaults <= 0 || given <= 0 || given == defaults {
		t.Fatalf("as-is with TE's default ub configuration %g s, with %s %g s: want both priced, and differently", defaults, ubFile, given)
	}
	if strings.Contains(out, "--tp-comm-overlap-cfg passed through") || strings.Contains(out, "--tp-comm-overlap-cfg, ") {
		t.Errorf("--tp-comm-overlap-cfg listed as not priced:\n%s", out)
	}
	out, _ = asIs("--tp-comm-overlap-cfg", "no-such-ub.yaml")
	if !strings.Contains(out, "not priced") || !strings.Contains(out, "--tp-comm-overlap-cfg: open no-such-ub.yaml") {
		t.Fatalf("an unreadable --tp-comm-overlap-cfg: want the layout refused naming it:\n%s", out)
	}
}

// asIsLlama8B prices llama3-8b's layout TP 8 PP 2 (micro-batch 1, bf16,
// distributed optimizer) with `plan --as-is` on the example cluster file
// named, plus the script flags extra: plan's output and the layout's
// seconds per iteration (0 when it was not priced).
func asIsLlama8B(t *testing.T, clusterFile string, extra ...string) (string, float64) {
	t.Helper()
	line := append([]string{"plan", "--cluster", "../../../examples/" + clusterFile, "--model", "llama3-8b", "--global-batch-size", "64",
		"--as-is", "--top", "1", "--", "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "2", "--micro-batch-size", "1", "--bf16",
		"--use-distributed-optimizer"}, extra...)
	code, out, errOut := runAppBuffers(line...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", extra, code, errOut)
	}
	var secs float64
	if _, rest, ok := strings.Cut(out, "your layout (TP 8 PP 2 DP 2"); ok {
		_, after, _ := strings.Cut(rest, "): ")
		fmt.Sscanf(after, "%g s/iteration", &secs)
	}
	return out, secs
}
