package limits

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsTable (issue 31): docs/usage.md said 4096 hosts per job while
// the code allowed 16384. Every exported limit of this package is a row of
// the "Limits" table there with the value the code has, and the table
// names nothing else.
func TestDocsTable(t *testing.T) {
	values := map[string]string{
		"MaxHosts": strconv.Itoa(MaxHosts), "MaxGPUsPerHost": strconv.Itoa(MaxGPUsPerHost), "MaxRanks": strconv.Itoa(MaxRanks),
		"MaxNameLen": strconv.Itoa(MaxNameLen), "MaxLayers": strconv.Itoa(MaxLayers), "MaxHidden": strconv.Itoa(MaxHidden),
		"MaxHeads": strconv.Itoa(MaxHeads), "MaxSeqLength": strconv.Itoa(MaxSeqLength), "MaxVocab": strconv.Itoa(MaxVocab),
		"MaxGlobalBatch": strconv.Itoa(MaxGlobalBatch), "MaxFileBytes": strconv.Itoa(MaxFileBytes), "MaxHostfileLine": strconv.Itoa(MaxHostfileLine),
		"LinkGbitPerS": LinkGbitPerS.String(), "BusGBytePerS": BusGBytePerS.String(), "TFLOPS": TFLOPS.String(),
		"MemoryGiB": MemoryGiB.String(), "HBMTBytePerS": HBMTBytePerS.String(), "LatencyMicroseconds": LatencyMicroseconds.String(),
		"CalibrationFactor": CalibrationFactor.String(), "IterationSeconds": IterationSeconds.String(),
		"CapacityFactor": CapacityFactor.String(), "MemoryHeadroom": MemoryHeadroom.String(),
		"MaxRunIDBytes": strconv.Itoa(MaxRunIDBytes), "MaxTokenizerBytes": strconv.Itoa(MaxTokenizerBytes),
	}
	// Every exported constant and variable of limits.go has a value above,
	// so a new limit cannot be left out of the docs.
	fs := token.NewFileSet()
	src, err := parser.ParseFile(fs, "limits.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range src.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
			continue
		}
		for _, s := range g.Specs {
			for _, n := range s.(*ast.ValueSpec).Names {
				if _, ok := values[n.Name]; n.IsExported() && !ok {
					t.Errorf("limits.go declares %s, which this test (and docs/usage.md's table) lacks", n.Name)
				}
			}
		}
	}
	doc, err := os.ReadFile("../../docs/usage.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `(\\w+)` \\| ([^|]+) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		name, val := m[1], strings.TrimSpace(m[2])
		want, ok := values[name]
		switch {
		case !ok:
			t.Errorf("docs/usage.md's limits table names %s, which internal/limits lacks", name)
		case val != want:
			t.Errorf("docs/usage.md: %s is %q; the code has %q", name, val, want)
		}
		seen[name] = true
	}
	for name := range values {
		if !seen[name] {
			t.Errorf("docs/usage.md's limits table lacks %s (%s)", name, values[name])
		}
	}
}

func TestRangeCheck(t *testing.T) {
	for _, tc := range []struct {
		r        Range
		v        float64
		optional bool
		want     string // "" for nil
	}{
		{LinkGbitPerS, 200, false, ""},
		{LinkGbitPerS, math.NaN(), false, "must be a number from 0.001 to 100000 Gbit/s, got NaN (not a number)"},
		{LinkGbitPerS, math.Inf(1), false, "got +Inf"},
		{LinkGbitPerS, 1e308, false, "got 1e+308"},
		{LinkGbitPerS, 1e-300, false, "got 1e-300"},
		{LinkGbitPerS, 0, false, "got 0"},
		{LinkGbitPerS, 0, true, ""},
		{LinkGbitPerS, -1, true, "must be 0 (not given) or a number from 0.001 to 100000 Gbit/s, got -1"},
		{MemoryHeadroom, 0, false, ""},
		{MemoryHeadroom, 0.5, false, "from 0 to below 0.5, got 0.5"},
		{MemoryHeadroom, math.NaN(), false, "NaN"},
		{CalibrationFactor, 20, false, ""},
		{CalibrationFactor, 1e-300, false, "from 0.05 to 20, got 1e-300"},
	} {
		check := tc.r.Check
		if tc.optional {
			check = tc.r.CheckOptional
		}
		err := check(tc.v)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v check(%g, optional %v) = %v, want %q", tc.r, tc.v, tc.optional, err, tc.want)
		}
	}
}
