package planner

import (
	"bytes"
	"cmp"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/pipette-launch/pipette-launch/"

// layer is each planner package's place in the pipeline: a package may
// import only packages of a lower layer (doc.go draws the same map).
var layer = map[string]int{
	"planner/gpu": 0, "planner/schedule": 0,
	"planner/model": 1, "planner/parallel": 1,
	"planner/fabric":  2,
	"planner/cluster": 3, "planner/megatron": 3,
	"planner/deepspeed": 4, "planner/memory": 4,
	"planner/search": 5,
	"planner":        6,
}

// maxLines is how long a package's non-test code may grow; search is one
// package on purpose (its package doc says why).
var maxLines = map[string]int{"planner/search": 4500}

// Every planner package imports only lower layers of planner, internal/
// and outside modules: never templates/, launcher/, cmd/ or anything else of
// the project; and none outgrows its size without a reason.
func TestPlannerLayering(t *testing.T) {
	seen := 0
	err := filepath.WalkDir(".", func(dir string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		pkg := filepath.ToSlash(filepath.Join("planner", dir))
		imports, lines := readPackage(t, dir)
		if lines == 0 {
			return nil
		}
		seen++
		own, ok := layer[pkg]
		if !ok {
			t.Errorf("%s: not in the layer map (place it in doc.go's map and here)", pkg)
			return nil
		}
		for _, imp := range imports {
			rel, ours := strings.CutPrefix(imp, module)
			switch {
			case !ours || strings.HasPrefix(rel, "internal/"):
			case strings.HasPrefix(rel, "planner"):
				if l, ok := layer[rel]; !ok || l >= own {
					t.Errorf("%s (layer %d) imports %s (layer %d): only lower layers", pkg, own, rel, l)
				}
			default:
				t.Errorf("%s imports %s: planner imports nothing of templates/, launcher/ or cmd/", pkg, rel)
			}
		}
		if most := cmp.Or(maxLines[pkg], 2000); lines > most {
			t.Errorf("%s: %d lines of non-test code, more than %d", pkg, lines, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < len(layer) {
		t.Errorf("read %d packages, the map has %d", seen, len(layer))
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
