// Package archtest checks the package layout that docs/architecture.md
// describes: which project packages may import which, and which packages may
// grow past the size limit. Its tests run it on the repository itself; the
// checks are plain functions over an import graph so that tests can also feed
// them made-up graphs and prove that a forbidden arrow is caught.
package archtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Package is one package of the module as the checks see it: its path
// relative to the module root ("planner/search"), what it imports and what
// its tests import (module packages relative to the root as well, others by
// their import path: "os/exec", "golang.org/x/crypto/ssh"), and how many lines
// its non-test Go files have.
type Package struct {
	Path        string
	Imports     []string
	TestImports []string
	Lines       int
}

// Graph maps a module-relative package path to its package.
type Graph map[string]*Package

// Rule forbids imports. A package matching From (and none of FromExcept)
// may not depend, directly or through other packages, on a package matching
// To unless that package matches Except. With Tests the package's test files
// are held to the rule too (their direct imports and everything below them).
//
// Patterns are module-relative for the module's packages and import paths
// for others ("os/exec"): "planner/..." matches planner and every package
// below it, "..." every package, anything else exactly one package.
type Rule struct {
	From       string
	FromExcept []string
	To         []string
	Except     []string
	Tests      bool
	Why        string
}

// Match reports whether a module-relative package path matches pattern.
func Match(pattern, path string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if Match(p, path) {
			return true
		}
	}
	return false
}

// Violations returns one line per forbidden arrow, naming the chain of
// imports that reaches it ("launcher/launch -> templates/job ->
// planner/cluster: ..."), sorted. A chain is the shortest one, stops at the
// first forbidden package it reaches, and is left out where it runs through
// another package the same rule holds to (that one is reported instead), so
// one bad import is reported once per rule.
func Violations(g Graph, rules []Rule) []string {
	var out []string
	for _, from := range sortedKeys(g) {
		for _, r := range rules {
			if !Match(r.From, from) || matchAny(r.FromExcept, from) {
				continue
			}
			for _, chain := range forbiddenChains(g, from, g[from].Imports, r) {
				if !r.passesOther(chain) {
					out = append(out, fmt.Sprintf("%s: %s", strings.Join(chain, " -> "), r.Why))
				}
			}
			if r.Tests {
				for _, chain := range forbiddenChains(g, from, g[from].TestImports, r) {
					if !r.passesOther(chain) {
						chain[0] += " (tests)"
						out = append(out, fmt.Sprintf("%s: %s", strings.Join(chain, " -> "), r.Why))
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// passesOther reports whether the chain runs through another package the
// rule holds to: that package's own report names the import to change, so
// the longer chain would only repeat it.
func (r Rule) passesOther(chain []string) bool {
	for _, p := range chain[1 : len(chain)-1] {
		if Match(r.From, p) && !matchAny(r.FromExcept, p) {
			return true
		}
	}
	return false
}

// forbiddenChains walks breadth first from the given first imports of
// package from and returns the shortest chain to each forbidden package.
func forbiddenChains(g Graph, from string, first []string, r Rule) [][]string {
	parent := map[string]string{from: ""}
	var queue []string
	for _, p := range first {
		if _, seen := parent[p]; !seen {
			parent[p] = from
			queue = append(queue, p)
		}
	}
	var out [][]string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if matchAny(r.To, p) && !matchAny(r.Except, p) {
			out = append(out, chainTo(parent, p))
			continue
		}
		pkg := g[p]
		if pkg == nil {
			continue
		}
		for _, next := range pkg.Imports {
			if _, seen := parent[next]; !seen {
				parent[next] = p
				queue = append(queue, next)
			}
		}
	}
	return out
}

func chainTo(parent map[string]string, p string) []string {
	var chain []string
	for ; p != ""; p = parent[p] {
		chain = append([]string{p}, chain...)
	}
	return chain
}

// Layers orders the packages under one folder (Root, "planner/..."): a
// package's code may import only packages of the folder in a lower layer
// (Layers[0] is the lowest). Tests may use any layer: a test of one stage
// may build its input with a sibling. Every package under the folder must
// sit in a layer, so a new package is placed on purpose.
type Layers struct {
	Root   string
	Layers [][]string
}

// Check returns one line per import against the order and per package of
// the folder that no layer names, sorted.
func (l Layers) Check(g Graph) []string {
	level := map[string]int{}
	for i, layer := range l.Layers {
		for _, p := range layer {
			level[p] = i
		}
	}
	var out []string
	for _, from := range sortedKeys(g) {
		if !Match(l.Root, from) {
			continue
		}
		own, ok := level[from]
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of %s: place it in docs/architecture.md's layer table and in archtest's", from, l.Root))
			continue
		}
		for _, to := range g[from].Imports {
			if lv, ok := level[to]; ok && Match(l.Root, to) && lv >= own {
				out = append(out, fmt.Sprintf("%s -> %s: layer %d imports layer %d of %s; only lower layers", from, to, own, lv, l.Root))
			}
		}
	}
	return out
}

// Allowlist names, for some packages, every package of the module their
// code may import directly besides internal/...: what the package map of
// docs/architecture.md gives as their only neighbours. It is stricter than a
// Rule, which names what is forbidden.
type Allowlist map[string][]string

// Check returns one line per direct import outside a package's list, and
// one per listed package the graph lacks (moved or renamed: update the
// list), sorted.
func (a Allowlist) Check(g Graph) []string {
	var out []string
	for _, from := range sortedKeys(a) {
		pkg := g[from]
		if pkg == nil {
			out = append(out, fmt.Sprintf("%s is not a package of the module (moved? update the allowlist)", from))
			continue
		}
		for _, imp := range pkg.Imports {
			if g[imp] == nil || Match("internal/...", imp) || matchAny(a[from], imp) {
				continue // outside the module, a shared helper, or allowed
			}
			out = append(out, fmt.Sprintf("%s -> %s: %s may import only internal/... and %v", from, imp, from, a[from]))
		}
	}
	return out
}

// Oversized returns one line per package over limit non-test lines that
// allowed does not name, and one per name in allowed that is not over the
// limit (or no longer exists), so that the list in the document cannot go
// stale in either direction.
func Oversized(g Graph, allowed map[string]string, limit int) []string {
	var out []string
	for _, path := range sortedKeys(g) {
		n := g[path].Lines
		if _, ok := allowed[path]; n > limit && !ok {
			out = append(out, fmt.Sprintf("%s has %d non-test lines (limit %d): split it, or name it with a reason in docs/architecture.md's %q table", path, n, limit, SizeSection))
		}
	}
	for _, path := range sortedKeys(allowed) {
		switch pkg := g[path]; {
		case pkg == nil:
			out = append(out, fmt.Sprintf("docs/architecture.md's %q table names %s, which is not a package of the module: remove the row", SizeSection, path))
		case pkg.Lines <= limit:
			out = append(out, fmt.Sprintf("docs/architecture.md's %q table names %s, which has only %d non-test lines (limit %d): remove the row", SizeSection, path, pkg.Lines, limit))
		}
	}
	return out
}

// SizeSection is the heading of the table in docs/architecture.md that names
// the packages allowed over the size limit.
const SizeSection = "Packages over 2,000 lines"

var rowPackage = regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|(.*)\\|\\s*$")

// AllowedLarge reads the table under the "## Packages over 2,000 lines"
// heading of a markdown document: every row whose first cell is a package
// path in backticks, mapped to the rest of the row (the reason). A row
// without a reason is an error: the exception exists to be explained.
func AllowedLarge(doc []byte) (map[string]string, error) {
	allowed := map[string]string{}
	in, found := false, false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") {
			in = strings.TrimSpace(strings.TrimLeft(text, "#")) == SizeSection
			found = found || in
			continue
		}
		if !in {
			continue
		}
		m := rowPackage.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		why := strings.TrimSpace(strings.ReplaceAll(m[2], "|", " "))
		if why == "" {
			return nil, fmt.Errorf("line %d: %s names no reason", line, m[1])
		}
		allowed[m[1]] = why
	}
	if !found {
		return nil, fmt.Errorf("no %q heading", "## "+SizeSection)
	}
	return allowed, sc.Err()
}

// listed is the part of `go list -json` output that Load reads.
type listed struct {
	ImportPath   string
	Dir          string
	Module       *struct{ Path string }
	GoFiles      []string
	CgoFiles     []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// Load runs `go list -deps -json ./...` in the module root dir and returns
// the module's own packages with their imports (test imports included) and
// line counts. Packages outside the module are not in the graph: a chain
// ends at them, so a rule can name one ("os/exec") but not what it imports.
func Load(goTool, dir string) (Graph, error) {
	cmd := exec.Command(goTool, "list", "-deps", "-json", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps -json ./... in %s: %w: %s", dir, err, stderr.Bytes())
	}
	var module string
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading go list output: %w", err)
		}
		if p.Module == nil || p.Dir == "" || !strings.HasPrefix(p.Dir, dir) {
			continue // the standard library or a dependency
		}
		module = p.Module.Path
		pkgs = append(pkgs, p)
	}
	if module == "" {
		return nil, fmt.Errorf("go list -deps -json ./... in %s listed no package of the module", dir)
	}
	rel := func(importPath string) (string, bool) {
		if importPath == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(importPath, module+"/")
		return r, ok
	}
	own := func(imports []string) []string {
		out := make([]string, 0, len(imports))
		for _, imp := range imports {
			if r, ok := rel(imp); ok {
				imp = r
			}
			out = append(out, imp)
		}
		return out
	}
	g := Graph{}
	for _, p := range pkgs {
		path, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		lines, err := countLines(p.Dir, append(p.GoFiles, p.CgoFiles...))
		if err != nil {
			return nil, err
		}
		g[path] = &Package{
			Path:        path,
			Imports:     own(p.Imports),
			TestImports: own(append(p.TestImports, p.XTestImports...)),
			Lines:       lines,
		}
	}
	return g, nil
}

func countLines(dir string, files []string) (int, error) {
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return 0, fmt.Errorf("counting lines: %w", err)
		}
		n += bytes.Count(b, []byte("\n"))
	}
	return n, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
