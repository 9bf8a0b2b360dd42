package main

import (
	"strings"
	"testing"
)

// `plan` of an MoE preset says the active parameters and shows each plan's
// EP/ETP; a pinned --ep is honoured.
func TestPlanMoEShowsExpertParallelism(t *testing.T) {
	code, out, errOut := runCLI(t, "plan", "--cluster", "a100-16x8.yaml", "--model", "mixtral-8x7b",
		"--global-batch-size", "256", "--top", "3", "--ep", "4", "--placement-budget", "200ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "46.7B parameters, 12.9B active; 8 experts, top-2") {
		t.Errorf("no active-parameter summary:\n%s", out)
	}
	tbl := tables(out)
	if len(tbl) == 0 || !strings.Contains(tbl[0][0], "EP/ETP") {
		t.Fatalf("no EP/ETP column:\n%s", out)
	}
	col := strings.Index(tbl[0][0], "EP/ETP")
	for _, row := range tbl[0][1:] {
		if len(row) <= col || !strings.HasPrefix(row[col:], "4/") {
			t.Errorf("row %q: EP is not the pinned 4", row)
		}
	}
}
