package run

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/dskit"
)

// TestElasticitySectionPlanned (issue 30): a planned (--cluster) DeepSpeed
// job whose config has an elasticity section gets the batch DeepSpeed
// computes from the section, not one of the planner's own: each plan (the
// first, and the restart after each host lost alone) is at a
// data-parallel size the kit's compute_elastic_config accepts, with its
// micro-batch and batch, and the config runs as the user wrote it (no
// batch keys added, which DeepSpeed refuses beside the section). When no
// size it accepts uses every GPU the plan leaves a host idle, named. A
// script's --global-batch-size the section does not give is refused.
func TestElasticitySectionPlanned(t *testing.T) {
	layout := regexp.MustCompile(`TP (\d+) PP (\d+) DP (\d+) CP 1, micro-batch (\d+), global batch (\d+)`)
	cases := []struct {
		name, section string
		idle          bool // no accepted size divides the 16 GPUs
	}{
		{name: "every GPU", section: `{"enabled": true, "max_train_batch_size": 100, "micro_batch_sizes": [3, 5], "min_gpus": 2, "max_gpus": 16, "prefer_larger_batch": false, "version": 0.1}`},
		{name: "a host idle", idle: true,
			section: `{"enabled": true, "max_train_batch_size": 90, "micro_batch_sizes": [3, 5], "min_gpus": 3, "max_gpus": 16, "version": 0.1}`},
	}
	kit, err := dskit.Find()
	if err != nil {
		t.Fatalf("%v; make deps sets the kits up", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ds.json")
			if err := os.WriteFile(cfg, []byte(`{"elasticity": `+c.section+`, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			args := dsPinArgs(dsPinCluster(t, dir, "{type: ethernet, count: 1, rate_gbit_per_s: 100}"), cfg)
			args = slices.DeleteFunc(args, func(a string) bool { return a == "--global-batch-size" || a == "96" })
			code, out, errOut := runCLI(t, append([]string{"--dry-run"}, args...)...)
			plans := regexp.MustCompile(`(?m)^# (plan 1 of|n\d lost: restarts on).*$`).FindAllString(out, -1)
			if want := 5 - map[bool]int{true: 1}[c.idle]; code != 0 || len(plans) != want { // (losing the idle host changes nothing)
				t.Fatalf("exit %d, %d plan lines, want 0 and %d: the first plan and one per host it runs on\n%s\n%s", code, len(plans), want, out, errOut)
			}
			var dps []int
			for _, p := range plans {
				m := layout.FindStringSubmatch(p)
				if m == nil {
					t.Fatalf("no layout in %q", p)
				}
				dp, _ := strconv.Atoi(m[3])
				dps = append(dps, dp)
			}
			fromKit := kitElasticBatches(t, kit, cfg, dps...) // DeepSpeed's own, per DP planned
			for i, p := range plans {
				m, dp := layout.FindStringSubmatch(p), dps[i]
				k := fromKit[dp]
				want := fmt.Sprintf("micro-batch %d, global batch %d", k.Micro, k.Train)
				note := fmt.Sprintf("DeepSpeed batch %d = micro %d x accumulation %d x DP %d, from its elasticity section", k.Train, k.Micro, k.Accum, dp)
				if !strings.Contains(m[0], want) || !strings.Contains(p, note) {
					t.Errorf("%q\nwant DeepSpeed's %s and %q", p, want, note)
				}
			}
			idle := "leaves 4 GPUs on n4 idle, nothing is started there (no data-parallel size DeepSpeed's elasticity section starts with (3, 5, 6, 9, 10, 15) has a layout on all 16 GPUs; planned on 12"
			if first := plans[0]; c.idle != strings.Contains(first, idle) {
				t.Errorf("first plan %q: want %q: %v", first, idle, c.idle)
			}
			if strings.Contains(out, "train_batch_size") || !strings.Contains(out, "--deepspeed_config "+cfg+" ") {
				t.Errorf("the ranks do not run the user's config as written:\n%s", out)
			}
		})
	}
	t.Run("the script's batch is not the section's", func(t *testing.T) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "ds.json")
		if err := os.WriteFile(cfg, []byte(`{"elasticity": `+cases[0].section+`, "zero_optimization": {"stage": 1}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI(t, append([]string{"--dry-run"}, dsPinArgs(dsPinCluster(t, dir, "{type: ethernet, count: 1, rate_gbit_per_s: 100}"), cfg)...)...)
		if code == 0 || !strings.Contains(errOut, "its elasticity section gives DP 2: batch 60") || !strings.Contains(errOut, "--global-batch-size 96") {
			t.Errorf("exit %d: want the script's --global-batch-size 96 refused, naming the section's sizes\n%s", code, errOut)
		}
	})
}
