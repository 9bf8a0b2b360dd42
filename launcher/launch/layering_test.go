package launch

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pipette-launch/pipette-launch/"

// allowed is what each launcher package (and the launch contract) may
// import of this project besides internal/: launch sees only the contract
// and the transport, never the planner or the rendering; probing may use
// the planner's descriptions of a cluster, never its search and cost
// model; remote, which both share, knows nothing of either.
var allowed = map[string][]string{
	"launcher/remote":            nil,
	"launcher/remote/remotetest": {"launcher/remote", "testbed"},
	"launcher/probe":             {"launcher/remote", "planner/cluster", "planner/gpu", "planner/model"},
	"launcher/probe/measure":     {"launcher/remote", "launcher/probe", "planner/cluster", "planner/gpu", "planner/model"},
	"launcher/launch":            {"launcher/remote", "templates/job"},
	"templates/job":              nil,
}

// TestLauncherLayering reads the packages' sources (no go tool needed):
// each imports only what allowed names, and none passes 2,000 lines of
// non-test code.
func TestLauncherLayering(t *testing.T) {
	for pkg, ok := range allowed {
		imports, lines := readPackage(t, filepath.Join("..", "..", filepath.FromSlash(pkg)))
		if lines == 0 {
			t.Errorf("%s: no Go files (moved? update the map)", pkg)
		}
		seen := map[string]bool{}
		for _, imp := range imports {
			rel, ours := strings.CutPrefix(imp, module)
			if !ours || strings.HasPrefix(rel, "internal/") || seen[rel] {
				continue
			}
			seen[rel] = true
			found := false
			for _, a := range ok {
				found = found || rel == a
			}
			if !found {
				t.Errorf("%s imports %s; it may import only internal/ and %v", pkg, rel, ok)
			}
		}
		if lines > 2000 {
			t.Errorf("%s: %d lines of non-test code, more than 2,000", pkg, lines)
		}
	}
}

// readPackage returns the imports and line count of a directory's non-test
// Go files.
func readPackage(t *testing.T, dir string) (imports []string, lines int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(src, []byte("\n"))
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range f.Imports {
			p, _ := strconv.Unquote(s.Path.Value)
			imports = append(imports, p)
		}
	}
	return imports, lines
}
