package plan

import (
	"encoding/json"
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

// `plan --json` of an MoE model carries the active parameters and each
// plan's ep/etp, and the expert all-to-all in the breakdown.
func TestPlanMoEJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "plan", "--cluster", "a100-16x8.yaml", "--model", "mixtral-8x7b",
		"--global-batch-size", "256", "--top", "1", "--json", "--placement-budget", "200ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	var res struct {
		Model struct {
			Active int64 `json:"active_parameters"`
		} `json:"model"`
		Plans []struct {
			EP        int `json:"ep"`
			ETP       int `json:"etp"`
			Predicted struct {
				Breakdown struct {
					EP float64 `json:"ep"`
				} `json:"breakdown_seconds"`
			} `json:"predicted"`
		} `json:"plans"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Model.Active < 12.8e9 || res.Model.Active > 12.95e9 {
		t.Errorf("active parameters %d, want about 12.88B", res.Model.Active)
	}
	if len(res.Plans) != 1 || res.Plans[0].EP < 1 || res.Plans[0].ETP < 1 {
		t.Fatalf("plans %+v: no ep/etp", res.Plans)
	}
	if res.Plans[0].EP > 1 && res.Plans[0].Predicted.Breakdown.EP <= 0 {
		t.Errorf("EP %d but no all-to-all time in the breakdown", res.Plans[0].EP)
	}
}
