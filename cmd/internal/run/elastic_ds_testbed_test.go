package run

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/dskit"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// dsBatchLine is one rank's DS_BATCH line of examples/ds_elastic.py: what
// the engine loaded and the batch it uses.
type dsBatchLine struct {
	Rank, World, DP, Loaded, Train, Micro, Accum, Stage int
	Universal                                           bool
}

func (b *dsBatchLine) UnmarshalJSON(data []byte) error {
	var r struct {
		Rank      int  `json:"rank"`
		World     int  `json:"world_size"`
		DP        int  `json:"dp_world_size"`
		Loaded    int  `json:"loaded_step"`
		Train     int  `json:"train_batch_size"`
		Micro     int  `json:"train_micro_batch_size_per_gpu"`
		Accum     int  `json:"gradient_accumulation_steps"`
		Stage     int  `json:"zero_stage"`
		Universal bool `json:"load_universal"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	*b = dsBatchLine(r)
	return nil
}

// dsBatchLines are the DS_BATCH lines of the ranks of world size world.
func dsBatchLines(t *testing.T, out string, world int) []dsBatchLine {
	t.Helper()
	var got []dsBatchLine
	for _, l := range strings.Split(out, "\n") {
		_, js, ok := strings.Cut(l, "DS_BATCH ")
		if !ok {
			continue
		}
		var b dsBatchLine
		if err := json.Unmarshal([]byte(js), &b); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if b.World == world {
			got = append(got, b)
		}
	}
	return got
}

// copyExample copies examples/name into dir, where the test-bed's hosts
// see it.
func copyExample(t *testing.T, dir, name string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(cmdtest.Testdata, "..", "..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cutOnce cuts host's network once out shows marker (the job saved a
// checkpoint); the channel says whether it did before ctx ended.
func cutOnce(ctx context.Context, t *testing.T, tb *testbed.Testbed, out *syncbuf.Buffer, marker, host string) <-chan bool {
	cut := make(chan bool, 1)
	go func() {
		for !strings.Contains(out.String(), marker) {
			if ctx.Err() != nil {
				cut <- false
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		if b, err := tb.Exec(ctx, host, "ip", "link", "set", "eth0", "down"); err != nil {
			t.Errorf("cut %s: %v %s", host, err, b)
		}
		cut <- true
	}()
	return cut
}

// kitBatch is a batch as DeepSpeed derives it: train_batch_size,
// micro-batch, accumulation.
type kitBatch struct{ Train, Micro, Accum int }

// kitElasticBatches is DeepSpeed's own compute_elastic_config, run from
// the kit (one interpreter for all worlds), for config's elasticity
// section at each world size: batch, micro batch and the accumulation
// DeepSpeedConfig derives. A world DeepSpeed refuses fails the test.
func kitElasticBatches(t *testing.T, kit *dskit.Kit, config string, worlds ...int) map[int]kitBatch {
	t.Helper()
	script := fmt.Sprintf(`import json
from deepspeed.elasticity import compute_elastic_config
for world in %s:
    final, _, micro = compute_elastic_config(json.load(open(%q)), "0.14.4", world_size=world)
    print("ELASTIC_BATCH", world, final, micro, final // (micro * world))`, strings.Join(strings.Fields(fmt.Sprint(worlds)), ", "), config)
	cmd := exec.Command(kit.Python, "-c", script)
	cmd.Env = append(os.Environ(), kit.Env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compute_elastic_config: %v\n%s", err, stderr.String())
	}
	// DeepSpeed logs to stdout too: the answers are lines of their own.
	got := map[int]kitBatch{}
	for _, line := range strings.Split(string(out), "\n") {
		var world int
		var b kitBatch
		if _, err := fmt.Sscanf(line, "ELASTIC_BATCH %d %d %d %d", &world, &b.Train, &b.Micro, &b.Accum); err == nil {
			got[world] = b
		}
	}
	if len(got) != len(slices.Compact(slices.Sorted(slices.Values(worlds)))) {
		t.Fatalf("compute_elastic_config printed %q for worlds %v", out, worlds)
	}
	return got
}

// TestElasticDeepSpeedOnTestbed (issue 30): real DeepSpeed v0.14.4 (the
// framework kit, CPU and gloo) on the test-bed's 4 hosts, one rank each,
// checkpointing with DeepSpeed's own save_checkpoint to a directory every
// host sees, each save converted by DeepSpeed's ds_to_universal.py (the
// one way v0.14.4 loads a ZeRO checkpoint at another DP size; the config
// says "load_universal"). node2's network is cut once step 2 is saved: the
// job restarts on the 3 hosts left, every rank's engine loads step 2 or
// later and trains on with the same global batch (ZeRO-1: train_batch_size
// 12, accumulation 3 -> 4; ZeRO-2 with an elasticity section: the batch
// DeepSpeed's compute_elastic_config gives, run from the kit, at 4 and at
// 3 ranks), and finishes. Root, and the kit (make deps sets it up).
func TestElasticDeepSpeedOnTestbed(t *testing.T) {
	t.Parallel() // its own test-bed, no environment set (run_testbed_test.go)
	kit, err := dskit.Find()
	if err != nil {
		t.Fatalf("%v; make deps sets the kits up", err)
	}
	tb, dir := e2eBed(t)
	copyExample(t, dir, "ds_elastic.py")
	for i, c := range []struct {
		name, config string
		elastic      bool
	}{
		{"ZeRO-1", `{"train_batch_size": 12, "train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
			"zero_optimization": {"stage": 1}, "checkpoint": {"load_universal": true}}`, false},
		{"ZeRO-2 elasticity", `{"elasticity": {"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [1, 2], "version": 0.1},
			"optimizer": {"type": "Adam", "params": {"lr": 0.001}}, "zero_optimization": {"stage": 2}, "checkpoint": {"load_universal": true}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(dir, fmt.Sprintf("ds%d.json", i))
			if err := os.WriteFile(cfg, []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			ckpt, err := os.MkdirTemp(dir, "ckpt-")
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"pipette-launch", "run", "--nnodes", "2:4", "--max-restarts", "2",
				"--hostfile", tb.HostsFile, "--nproc-per-node", "1", "--framework", "deepspeed",
				"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile,
				"--python", kit.Python, "--env-file", kit.EnvList, "--workdir", dir, "--stop-grace", "3s", "--heartbeat-timeout", "3s",
				"--master-port", fmt.Sprint(29631 + i), filepath.Join(dir, "ds_elastic.py"), "--deepspeed_config", cfg,
				"--ckpt-dir", ckpt, "--steps", "8", "--save-every", "2", "--step-time", "1", "--universal"}
			var out, errOut syncbuf.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cut := cutOnce(ctx, t, tb, &out, "SAVED step 2\n", "node2")
			code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			cancel()
			wasCut := <-cut
			defer restoreHost(t, tb, "node2")
			o, e := out.String(), errOut.String()
			if !wasCut || code != 0 {
				t.Fatalf("exit %d (cut: %v)\nstdout:\n%s\nstderr:\n%s", code, wasCut, o, e)
			}
			before, after := dsBatchLines(t, o, 4), dsBatchLines(t, o, 3)
			if len(before) != 4 || len(after) != 3 {
				t.Fatalf("%d ranks of 4 and %d of 3 report their engine, want 4 and 3\nstdout:\n%s", len(before), len(after), o)
			}
			for _, b := range after {
				if b.Loaded < 2 || b.DP != 3 || b.Train != before[0].Train || b.Micro*b.Accum*b.DP != b.Train {
					t.Errorf("rank %d after the loss: %+v, want step >= 2 loaded at DP 3 with the batch %d of the first attempt", b.Rank, b, before[0].Train)
				}
			}
			for _, w := range []string{"finished on 3 hosts after 1 restart", "attempt 2 (restart 1): 3 hosts: node1 node3 node4", "blamed     : node2 lost",
				fmt.Sprintf("DeepSpeed batch %d = micro %d x accumulation %d x DP 3", after[0].Train, after[0].Micro, after[0].Accum)} {
				if !strings.Contains(e, w) {
					t.Errorf("stderr lacks %q\nstderr:\n%s", w, e)
				}
			}
			// Steps redone, from the iteration lines: at most the 2 since
			// the last save (DeepSpeed's own "step=0" start-up line is not one).
			if m := regexp.MustCompile(`redone     : (\d+) steps? \(the attempt before printed step \d+ last, this one step (\d+) first\)`).FindStringSubmatch(e); m == nil {
				t.Errorf("the summary does not say the steps redone\nstderr:\n%s", e)
			} else if n, _ := strconv.Atoi(m[1]); n > 2 || m[2] == "0" {
				t.Errorf("%s steps redone from step %s, want at most the 2 since the last save\nstderr:\n%s", m[1], m[2], e)
			}
			if n := strings.Count(o, "DONE step 8 world 3"); n != 3 {
				t.Errorf("%d ranks report DONE step 8 world 3, want 3\nstdout:\n%s", n, o)
			}
			if c.elastic {
				for _, x := range []struct {
					world int
					got   dsBatchLine
				}{{4, before[0]}, {3, after[0]}} {
					k := kitElasticBatches(t, kit, cfg, x.world)[x.world]
					if x.got.Train != k.Train || x.got.Micro != k.Micro || x.got.Accum != k.Accum {
						t.Errorf("world %d: the engine uses batch %d micro %d accumulation %d, compute_elastic_config gives %d %d %d", x.world, x.got.Train, x.got.Micro, x.got.Accum, k.Train, k.Micro, k.Accum)
					}
				}
			} else if before[0].Train != 12 || before[0].Accum != 3 || after[0].Accum != 4 {
				t.Errorf("ZeRO-1: batch %d accumulation %d -> %d, want 12, 3 -> 4", before[0].Train, before[0].Accum, after[0].Accum)
			}
			t.Logf("engine before: %+v; after: %+v", before[0], after[0])
			t.Logf("stderr:\n%s", e)
		})
	}
}
