package templates

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestPreflightJob(t *testing.T) {
	c := twoIBIslands(recentStack)
	p := crossPipelinePlan(c)
	o := Options{Script: "pretrain_gpt.py", Args: gpt24Args, Python: "/opt/py/bin/python"}
	job, err := Render(p, c, o)
	if err != nil {
		t.Fatal(err)
	}
	pj, spec, err := Preflight(job, c, p, o, PreflightOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	count := map[string]int{}
	for _, ph := range spec.Phases {
		names = append(names, ph.Name)
		for _, g := range ph.Groups {
			count[g.Type]++
			want := map[string]string{"tp": "intra-host", "dp": "IB", "pp": "Socket"}[g.Type]
			if g.Transport != want || g.Net != map[string]string{"tp": "IB", "dp": "IB", "pp": "Socket"}[g.Type] {
				t.Errorf("%s: transport %s net %s, want %s", g.ID, g.Transport, g.Net, want)
			}
			if g.AssumedBytesPerS <= 0 && g.Type != "tp" { // the test cluster has no intra-host figure
				t.Errorf("%s: no assumed bandwidth", g.ID)
			}
		}
	}
	// TP 4 inside each of 4 hosts, DP 2 in 8 groups, PP 2: 8 links.
	if !slices.Equal(names, []string{"tp", "dp", "pp-even"}) || count["tp"] != 4 || count["dp"] != 8 || count["pp"] != 8 {
		t.Errorf("phases %v, groups %v", names, count)
	}
	for hi, h := range pj.Hosts {
		if len(h.Ranks) != len(job.Hosts[hi].Ranks) {
			t.Fatalf("host %s: %d ranks, the job has %d", h.Name, len(h.Ranks), len(job.Hosts[hi].Ranks))
		}
		for ri, r := range h.Ranks {
			if !slices.Equal(r.Argv, []string{"/opt/py/bin/python", "-u", job.FilesDir + "/" + PreflightScriptFile, job.FilesDir + "/" + PreflightSpecFile}) || job.FilesDir == "" || pj.FilesDir != job.FilesDir {
				t.Errorf("rank %d argv %q", r.Rank, r.Argv)
			}
			if !slices.Equal(r.Env, job.Hosts[hi].Ranks[ri].Env) {
				t.Errorf("rank %d: the preflight's environment differs from the job's", r.Rank)
			}
		}
	}
	var back PreflightSpec
	if err := json.Unmarshal(pj.Files[1].Content, &back); err != nil || len(back.Phases) != 3 || back.TimeoutS != 30 {
		t.Errorf("spec file: %v %+v", err, back)
	}
}
