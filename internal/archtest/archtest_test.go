package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// rules are the import rules of docs/architecture.md ("Allowed imports").
// Change them together with that page.
var rules = []Rule{
	{From: "planner/...", To: []string{"templates/...", "launcher/...", "cmd/..."}, Tests: true,
		Why: "planner is pure planning: it must not reach rendering, host access or the CLI"},
	{From: "templates/...", To: []string{"launcher/...", "cmd/..."}, Tests: true,
		Why: "templates renders without host access: it must not reach launcher or the CLI"},
	{From: "planner/...", To: hostAccess, Why: "planner does no I/O on hosts"},
	{From: "templates/...", To: hostAccess, Why: "templates renders without host access"},
	{From: "launcher/launch", To: []string{"planner/...", "templates/...", "launcher/probe/..."},
		Except: []string{"templates/job"},
		Why:    "launcher/launch starts what templates/job describes and must not see plans, costs or rendering"},
	{From: "launcher/probe/...", To: []string{"planner/search/...", "launcher/launch"},
		Why: "probing writes cluster specs and must not depend on the search, the cost model or the launch"},
	{From: "internal/...", To: []string{"planner/...", "templates/...", "launcher/...", "cmd/...", "report/...",
		"preflight/...", "tokenizer/...", "testbed/...", "examples/...", "bench/..."}, Tests: true,
		Why: "internal helpers are shared by every layer and import nothing above them"},
	{From: "templates/job", To: []string{"templates", "planner/...", "launcher/...", "cmd/..."},
		Why: "templates/job is the launch contract: free of planning and rendering, so the launch can import it"},
	{From: "launcher/remote/...", To: []string{"planner/...", "templates/...", "launcher/probe/...", "launcher/launch"},
		Why: "launcher/remote reaches hosts and knows nothing of plans, probes or jobs"},
	{From: "cmd/internal/cmdutil", To: commands,
		Why: "cmdutil is what the commands share: commands import it, never the reverse"},
	{From: "...", To: []string{"cmd/internal/cmdtest", "launcher/remote/remotetest", "internal/inputfile/inputfiletest"},
		Why: "test helpers are for tests only"},
	{From: "launcher/elastic", To: []string{"planner/...", "templates/...", "launcher/probe/..."},
		Except: []string{"templates/job"},
		Why:    "launcher/elastic restarts jobs: the command re-plans for it, so it never sees a plan"},
	{From: "cmd/internal/launchline", To: commands,
		Why: "launchline reads launch lines for the commands: they import it, never the reverse"},
}

// commands are the packages of pipette-launch's commands.
var commands = []string{"cmd/internal/plan", "cmd/internal/run", "cmd/internal/probe", "cmd/internal/calibrate",
	"cmd/internal/sbatch", "cmd/internal/preflight"}

// hostAccess are the packages that run commands or reach other hosts. Tests
// may use them (a template's script is run by its tests); code may not.
var hostAccess = []string{"os/exec", "net/http", "golang.org/x/crypto/ssh/...", "github.com/melbahja/goph/...",
	"github.com/kevinburke/ssh_config"}

// neighbours is what the launcher's packages and the launch contract may
// import of the module besides internal/...: launch sees only the contract
// and the transport; probing may use the planner's descriptions of a
// cluster, never its search; the launch probe only the probe's script and
// readers and the transport; remote, which they all share, knows nothing
// of them (docs/architecture.md, package map).
var neighbours = Allowlist{
	"launcher/remote":            nil,
	"launcher/remote/remotetest": {"launcher/remote", "testbed"},
	"launcher/probe":             {"launcher/remote", "planner/cluster", "planner/gpu", "planner/model"},
	"launcher/probe/measure":     {"launcher/remote", "launcher/probe", "planner/cluster", "planner/gpu", "planner/model"},
	"launcher/probe/launchprobe": {"launcher/remote", "launcher/probe"},
	"launcher/launch":            {"launcher/remote", "templates/job"},
	"launcher/elastic":           {"launcher/launch", "launcher/remote", "templates/job"},
	"templates/job":              nil,
}

// plannerLayers is the order of the planner's stages (docs/architecture.md,
// "Layers of planner/"); a stage imports only stages below it.
var plannerLayers = Layers{Root: "planner/...", Layers: [][]string{
	{"planner/gpu", "planner/schedule"},
	{"planner/model", "planner/parallel"},
	{"planner/fabric", "planner/cluster/calib"},
	{"planner/cluster", "planner/megatron", "planner/megatron/tpoverlap"},
	{"planner/deepspeed", "planner/memory", "planner/calibration"},
	{"planner/search"},
	{"planner"},
}}

// sizeLimit is the number of non-test lines a package may have without a
// reason written in docs/architecture.md.
const sizeLimit = 2000

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root %s: %v", root, err)
	}
	return root
}

// goTool finds the go command the test runs under.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command on PATH or in GOROOT (%s): add Go's bin directory to PATH", p)
	}
	return p
}

var repoGraph struct {
	once sync.Once
	g    Graph
	err  error
}

// loadRepo loads the repository's graph once for all tests.
func loadRepo(t *testing.T) Graph {
	t.Helper()
	tool, root := goTool(t), repoRoot(t)
	repoGraph.once.Do(func() { repoGraph.g, repoGraph.err = Load(tool, root) })
	g, err := repoGraph.g, repoGraph.err
	if err != nil {
		t.Fatal(err)
	}
	// The test would pass vacuously on a graph without the packages the
	// rules are about.
	for _, p := range []string{"planner", "templates", "cmd/pipette-launch"} {
		if g[p] == nil {
			t.Fatalf("go list found no package %s: the loader is broken", p)
		}
	}
	return g
}

// TestLayoutImports fails, naming the chain of imports, when a package of
// the repository depends on one the layout forbids it.
func TestLayoutImports(t *testing.T) {
	for _, v := range Violations(loadRepo(t), rules) {
		t.Error("forbidden import: " + v)
	}
}

// TestLayoutLayers fails when a planner stage imports one at its own layer
// or above, or a planner package sits in no layer.
func TestLayoutLayers(t *testing.T) {
	for _, v := range plannerLayers.Check(loadRepo(t)) {
		t.Error(v)
	}
}

// TestLayoutNeighbours fails when a launcher package or the launch contract
// imports a package of the module its list does not name.
func TestLayoutNeighbours(t *testing.T) {
	for _, v := range neighbours.Check(loadRepo(t)) {
		t.Error(v)
	}
}

// TestAllowlistCatchesOtherImports proves the allowlist check can fail.
func TestAllowlistCatchesOtherImports(t *testing.T) {
	a := Allowlist{"launcher/launch": {"launcher/remote", "templates/job"}, "templates/job": nil}
	tests := []graphCase{
		{"only its neighbours, helpers and outside packages",
			[]string{"launcher/launch: launcher/remote templates/job internal/text os/exec", "launcher/remote:",
				"templates/job: internal/shellquote", "internal/text:", "internal/shellquote:"}, nil},
		{"a package the list does not name",
			[]string{"launcher/launch: launcher/remote templates/job preflight", "launcher/remote:", "templates/job:",
				"preflight:"},
			[]string{"launcher/launch -> preflight: launcher/launch may import only internal/... and [launcher/remote templates/job]"}},
		{"a listed package that moved",
			[]string{"launcher/launch: launcher/remote", "launcher/remote:"},
			[]string{"templates/job is not a package of the module (moved? update the allowlist)"}},
	}
	runGraphCases(t, nil, tests, a.Check)
}

// TestLayoutPackageSizes fails when a package is over the size limit without
// a reason in docs/architecture.md, or the page names one that is not.
func TestLayoutPackageSizes(t *testing.T) {
	root := repoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := AllowedLarge(doc)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	for _, v := range Oversized(loadRepo(t), allowed, sizeLimit) {
		t.Error(v)
	}
}

// graph builds a synthetic graph from "pkg: imp imp | testimp" lines.
func graph(lines ...string) Graph {
	g := Graph{}
	for _, l := range lines {
		name, rest, _ := strings.Cut(l, ":")
		prod, test, _ := strings.Cut(rest, "|")
		g[name] = &Package{Path: name, Imports: strings.Fields(prod), TestImports: strings.Fields(test)}
	}
	return g
}

// graphCase is a made-up graph (graph's "pkg: imp imp | testimp" lines on
// top of a base) and the exact report a check must give on it.
type graphCase struct {
	name  string
	graph []string
	want  []string
}

func runGraphCases(t *testing.T, base []string, cases []graphCase, check func(Graph) []string) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			got := check(graph(append(append([]string{}, base...), tt.graph...)...))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

// TestViolationsCatchForbiddenArrows proves the check can fail: each case is
// a made-up graph with one forbidden arrow (direct, through another package,
// or only in tests) or an allowed one, and the exact report expected.
func TestViolationsCatchForbiddenArrows(t *testing.T) {
	layered := []string{
		"planner: planner/search", "planner/cluster:", "planner/search: planner/cluster", "planner/cost: planner/cluster",
		"templates: planner templates/job", "templates/job:", "launcher/remote:",
		"launcher/probe: launcher/remote planner/cluster", "launcher/launch: launcher/remote templates/job",
		"cmd/internal/run: planner templates launcher/launch", "internal/atomicfile:",
	}
	tests := []graphCase{
		{"the target layout is clean", nil, nil},
		{"planner imports templates directly",
			[]string{"planner/search: planner/cluster templates"},
			[]string{"planner/search -> templates: " + rules[0].Why}},
		{"planner reaches launcher through a helper",
			[]string{"planner/cost: planner/cluster planner/fabric", "planner/fabric: launcher/remote"},
			[]string{"planner/fabric -> launcher/remote: " + rules[0].Why}},
		{"a planner test imports templates",
			[]string{"planner/cluster: | templates"},
			[]string{"planner/cluster (tests) -> templates: " + rules[0].Why}},
		{"templates opens a host connection",
			[]string{"templates: planner templates/job launcher/remote"},
			[]string{"templates -> launcher/remote: " + rules[1].Why}},
		{"launcher/launch imports the renderer",
			[]string{"launcher/launch: launcher/remote templates/job templates"},
			[]string{"launcher/launch -> templates: " + rules[4].Why}},
		{"launcher/launch reaches the planner through the job contract",
			[]string{"templates/job: planner/cluster"},
			[]string{
				"launcher/launch -> templates/job -> planner/cluster: " + rules[4].Why,
				"templates/job -> planner/cluster: " + rules[7].Why,
			}},
		{"launcher/remote reads a cluster spec",
			[]string{"launcher/remote: planner/cluster"},
			[]string{
				"launcher/launch -> launcher/remote -> planner/cluster: " + rules[4].Why,
				"launcher/remote -> planner/cluster: " + rules[8].Why,
			}},
		{"cmdutil imports a command, code imports a test helper",
			[]string{"cmd/internal/cmdutil: cmd/internal/run", "cmd/internal/run: planner launcher/remote/remotetest",
				"launcher/remote/remotetest: launcher/remote"},
			[]string{
				"cmd/internal/cmdutil -> cmd/internal/run: " + rules[9].Why,
				"cmd/internal/run -> launcher/remote/remotetest: " + rules[10].Why,
			}},
		{"tests may import the test helpers",
			[]string{"cmd/internal/run: planner | cmd/internal/cmdtest", "cmd/internal/cmdtest: cmd/internal/cmdutil",
				"cmd/internal/cmdutil:"},
			nil},
		{"launcher/launch's tests may use the planner",
			[]string{"launcher/launch: launcher/remote templates/job | planner templates"},
			nil},
		{"launcher/probe imports the search",
			[]string{"launcher/probe: launcher/remote planner/cluster planner/search"},
			[]string{"launcher/probe -> planner/search: " + rules[5].Why}},
		{"launcher/probe may import the cluster spec", nil, nil},
		{"a shared helper imports the planner",
			[]string{"internal/atomicfile: planner/cluster"},
			[]string{"internal/atomicfile -> planner/cluster: " + rules[6].Why}},
		{"templates runs a command",
			[]string{"templates: planner templates/job os/exec"},
			[]string{"templates -> os/exec: " + rules[3].Why}},
		{"the planner reaches ssh through a helper, its tests may run commands",
			[]string{"planner/cluster: internal/dial | os/exec", "internal/dial: golang.org/x/crypto/ssh"},
			[]string{
				"planner/cluster -> internal/dial -> golang.org/x/crypto/ssh: " + rules[2].Why,
				"templates -> planner -> planner/search -> planner/cluster -> internal/dial -> golang.org/x/crypto/ssh: " +
					rules[3].Why,
			}},
	}
	runGraphCases(t, layered, tests, func(g Graph) []string { return Violations(g, rules) })
}

// TestLayersCatchUpwardImports proves the layer check can fail.
func TestLayersCatchUpwardImports(t *testing.T) {
	l := Layers{Root: "planner/...", Layers: [][]string{{"planner/gpu"}, {"planner/model", "planner/parallel"}, {"planner"}}}
	tests := []graphCase{
		{"downward only", []string{"planner: planner/model planner/gpu internal/text", "planner/model: planner/gpu",
			"planner/parallel: planner/gpu", "planner/gpu: os"}, nil},
		{"upward", []string{"planner: planner/model", "planner/model: planner/gpu", "planner/gpu: planner/model"},
			[]string{"planner/gpu -> planner/model: layer 0 imports layer 1 of planner/...; only lower layers"}},
		{"same layer", []string{"planner: ", "planner/model: planner/parallel", "planner/parallel:", "planner/gpu:"},
			[]string{"planner/model -> planner/parallel: layer 1 imports layer 1 of planner/...; only lower layers"}},
		{"tests may use any layer", []string{"planner:", "planner/model: | planner/parallel", "planner/gpu: | planner"}, nil},
		{"a package in no layer", []string{"planner:", "planner/gpu:", "planner/extra: planner/gpu", "templates: planner/extra"},
			[]string{"planner/extra is in no layer of planner/...: place it in docs/architecture.md's layer table and in archtest's"}},
	}
	runGraphCases(t, nil, tests, l.Check)
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, path string
		want          bool
	}{
		{"planner/...", "planner", true},
		{"planner/...", "planner/search/placement", true},
		{"planner/...", "plannerx", false},
		{"templates/job", "templates/job", true},
		{"templates/job", "templates", false},
		{"templates/job", "templates/job/x", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.path); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

// TestOversizedReadsTheDoc proves the size check can fail in both
// directions, with the exceptions read from a page as the repository's is.
func TestOversizedReadsTheDoc(t *testing.T) {
	doc := "# Architecture\n\n## " + SizeSection + "\n\n| package | why |\n| --- | --- |\n" +
		"| `planner/search` | search, cost and placement share 84 unexported names |\n" +
		"| `report` | draws every figure |\n\n## Next\n\n| `testbed` | not in the table |\n"
	allowed, err := AllowedLarge([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"planner/search", "report"}; !reflect.DeepEqual(sortedKeys(allowed), want) {
		t.Fatalf("allowed = %v, want %v (rows outside the section must not count)", sortedKeys(allowed), want)
	}
	g := Graph{
		"planner/search": {Path: "planner/search", Lines: 3900},
		"report":         {Path: "report", Lines: 1500},
		"testbed":        {Path: "testbed", Lines: 2158},
		"tokenizer":      {Path: "tokenizer", Lines: 321},
	}
	got := Oversized(g, allowed, 2000)
	if len(got) != 2 || !strings.HasPrefix(got[0], "testbed has 2158 non-test lines") ||
		!strings.Contains(got[1], "names report, which has only 1500 non-test lines") {
		t.Errorf("Oversized = %q, want testbed over the limit and report's row stale", got)
	}
	for _, bad := range []string{"# Architecture\n", "## " + SizeSection + "\n| `x` |  |\n"} {
		if _, err := AllowedLarge([]byte(bad)); err == nil {
			t.Errorf("AllowedLarge(%q) gave no error", bad)
		}
	}
}

// TestMakefileFuzzTargetsExist fails when a fuzz target `make fuzz` names is
// not in its package: `go test -fuzz` on a package without the target fuzzes
// nothing and passes, so a moved target would silently stop being fuzzed.
func TestMakefileFuzzTargetsExist(t *testing.T) {
	root := repoRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(mk), "\nFUZZ_TARGETS =")
	if !ok {
		t.Fatal("Makefile has no FUZZ_TARGETS")
	}
	var targets []string
	for line := range strings.Lines(rest) {
		targets = append(targets, strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), "\\"))...)
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			break
		}
	}
	if len(targets) == 0 {
		t.Fatal("Makefile's FUZZ_TARGETS is empty")
	}
	for _, target := range targets {
		parts := strings.Split(target, ":")
		if len(parts) != 3 || !isPositiveInt(parts[2]) {
			t.Errorf("FUZZ_TARGETS entry %q: want ./package:FuzzName:executions", target)
			continue
		}
		pkg, fn := parts[0], parts[1]
		tests, _ := filepath.Glob(filepath.Join(root, pkg, "*_test.go"))
		found := false
		for _, f := range tests {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || strings.Contains(string(src), "\nfunc "+fn+"(f *testing.F)")
		}
		if !found {
			t.Errorf("Makefile's FUZZ_TARGETS names %s, but no test file of %s defines func %s(f *testing.F)", target, pkg, fn)
		}
	}
}

// isPositiveInt: s is a count make's shell arithmetic takes.
func isPositiveInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}
