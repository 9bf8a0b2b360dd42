package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/dskit"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/planner/deepspeed"
)

// TestDeepSpeedReloadRules: the rule the elastic restart follows
// (deepspeed.UserConfig.CheckReload) is the real engine's. DeepSpeed v0.14.4
// (the framework kit, CPU and gloo) saves a checkpoint on 2 ranks and
// loads it on 1, through pipette-launch on this machine: a ZeRO-1 and a
// ZeRO-2 checkpoint (elastic_checkpoint or not) are refused with
// DeepSpeed's ZeRORuntimeException, one without ZeRO loads, and a
// universal one (ds_to_universal.py, "load_universal") loads. Needs the
// kit (make deps sets it up); about 2 minutes on 2 cores.
func TestDeepSpeedReloadRules(t *testing.T) {
	t.Parallel() // its own directories and ports, no environment set (run_testbed_test.go)
	kit, err := dskit.Find()
	if err != nil {
		t.Fatalf("%v; make deps sets the kits up", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "ds_elastic.py"))
	if err != nil {
		t.Fatal(err)
	}
	const adam = `"optimizer": {"type": "Adam", "params": {"lr": 0.001}}`
	for i, c := range []struct {
		name, config string
		universal    bool
	}{
		{"ZeRO-1", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, ` + adam + `, "zero_optimization": {"stage": 1}}`, false},
		{"ZeRO-2 elastic_checkpoint", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, ` + adam + `, "zero_optimization": {"stage": 2, "elastic_checkpoint": true}}`, false},
		{"no ZeRO", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, ` + adam + `}`, false},
		{"ZeRO-1 universal", `{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1, ` + adam + `, "zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "ds.json")
			if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			u, err := deepspeed.ParseUserConfig("--deepspeed_config", cfg, []byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			ours := u.CheckReload(2, 1)
			run := func(ranks, steps int) (int, string) {
				args := []string{"pipette-launch", "run", "--standalone", "--nproc-per-node", fmt.Sprint(ranks), "--python", kit.Python,
					"--env-file", kit.EnvList, "--master-port", fmt.Sprint(29651 + i), "--workdir", dir, script,
					"--deepspeed_config", cfg, "--ckpt-dir", filepath.Join(dir, "ckpt"), "--steps", fmt.Sprint(steps), "--save-every", "2"}
				if c.universal {
					args = append(args, "--universal")
				}
				var out syncbuf.Buffer
				code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
				return code, out.String()
			}
			if code, out := run(2, 2); code != 0 || !strings.Contains(out, "SAVED step 2") {
				t.Fatalf("saving on 2 ranks: exit %d\n%s", code, out)
			}
			code, out := run(1, 4)
			loaded := code == 0 && strings.Contains(out, "RESUMED from step 2 world 1")
			refused := code != 0 && strings.Contains(out, "ZeRORuntimeException: The checkpoint being loaded used a DP world size of 2 but the current world size is 1")
			switch {
			case ours == nil && !loaded:
				t.Errorf("we would restart at DP 1, but DeepSpeed does not load it: exit %d\n%s", code, out)
			case ours != nil && !refused:
				t.Errorf("we refuse (%v), but DeepSpeed does not raise its ZeRORuntimeException: exit %d\n%s", ours, code, out)
			}
			t.Logf("DP 2 -> 1: DeepSpeed loads: %v; ours: %v", loaded, ours)
		})
	}
}
