package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// deepSpeedPartition: a DeepSpeed plan's uneven layer split
// (PIPETTE_PIPELINE_LAYERS, see templates.PipelineLayersEnv) reaches a real
// DeepSpeed v0.14.4 PipelineModule through templates/site: the job's
// sitecustomize.py (first on PYTHONPATH, as rendered) or the script calling
// pipette_ds_partition.install() itself. Four ranks (CPU, gloo) build
// Megatron-DeepSpeed's layer list shape (an embedding, 8 transformer layers,
// a norm, the head) with partition_method="type:transformer", launched by
// pipette-launch. Without the split DeepSpeed's own balanced split gives
// 2/2/2/2; with it each stage holds the planned 1/2/2/3, and 2,2,2,2 gives
// DeepSpeed's own boundaries.
func (h *harness) deepSpeedPartition(t *testing.T) {
	python, envList, _ := dsEnv(t)
	siteDir, err := filepath.Abs("../templates/site")
	if err != nil {
		t.Fatal(err)
	}
	own := h.runPartition(t, python, envList, siteDir, "", "", 29690)
	if got := layersPerStage(own); !slices.Equal(got, []int{2, 2, 2, 2}) {
		t.Fatalf("DeepSpeed's own type:transformer split: %v layers per stage, want 2/2/2/2 (reports %+v)", got, own)
	}
	even := h.runPartition(t, python, envList, siteDir, "2,2,2,2", "install", 29691)
	if !slices.Equal(even[0].Parts, own[0].Parts) {
		t.Errorf("PIPETTE_PIPELINE_LAYERS=2,2,2,2 gives parts %v, DeepSpeed's own method %v", even[0].Parts, own[0].Parts)
	}
	for k, how := range []string{"install", "sitecustomize"} {
		uneven := h.runPartition(t, python, envList, siteDir, "1,2,2,3", how, 29692+k)
		if got := layersPerStage(uneven); !slices.Equal(got, []int{1, 2, 2, 3}) {
			t.Errorf("PIPETTE_PIPELINE_LAYERS=1,2,2,3 by %s: the module holds %v layers per stage (reports %+v)", how, got, uneven)
		}
		fmt.Printf("deepspeed partition: own split %v, planned 1,2,2,3 by %s -> parts %v\n", own[0].Parts, how, uneven[0].Parts)
	}
}

type partitionReport struct {
	Rank        int   `json:"rank"`
	Stage       int   `json:"stage"`
	Parts       []int `json:"parts"`
	Start       int   `json:"start"`
	Stop        int   `json:"stop"`
	Transformer int   `json:"transformer_layers"`
}

// runPartition launches kit/ds_partition.py on 4 local ranks; split ""
// runs DeepSpeed's own method, else that split applied by how: "install"
// (the script calls the helper) or "sitecustomize" (siteDir first on the
// ranks' PYTHONPATH, as a rendered job has it).
func (h *harness) runPartition(t *testing.T, python, envList, siteDir, split, how string, port int) []partitionReport {
	if how == "sitecustomize" {
		envList = withPythonPathFirst(t, envList, siteDir)
	}
	args := []string{"--standalone", "--nproc-per-node", "4", "--python", python, "--master-port", strconv.Itoa(port), "--env-file", envList}
	script := []string{filepath.Join(h.kitDir, "ds_partition.py"), "--layers", "8", "--pp", "4", "--helper-dir", siteDir}
	if split != "" {
		args = append(args, "--env", "PIPETTE_PIPELINE_LAYERS="+split)
	}
	if how == "install" {
		script = append(script, "--install")
	}
	cmd := exec.Command(h.bin, append(args, script...)...)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("partition job (split %q %s): %v: %s", split, how, err, lastLines(out.String(), 5))
	}
	t.Logf("partition job (split %q %s): %.0f s", split, how, time.Since(start).Seconds())
	reports := make([]partitionReport, 4)
	seen := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if _, js, ok := strings.Cut(l, "DS_PARTITION "); ok {
			var r partitionReport
			if err := json.Unmarshal([]byte(js), &r); err != nil || r.Stage < 0 || r.Stage > 3 {
				t.Fatalf("bad report %q: %v", js, err)
			}
			reports[r.Stage] = r
			seen++
		}
	}
	if seen != 4 {
		t.Fatalf("partition job (split %q): %d ranks reported, want 4: %s", split, seen, lastLines(out.String(), 5))
	}
	return reports
}

func layersPerStage(reports []partitionReport) []int {
	n := make([]int, len(reports))
	for i, r := range reports {
		n[i] = r.Transformer
	}
	return n
}

// withPythonPathFirst writes a copy of the kit's env.list whose PYTHONPATH
// starts with dir.
func withPythonPathFirst(t *testing.T, envList, dir string) string {
	b, err := os.ReadFile(envList)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	found := false
	for i, l := range lines {
		if v, ok := strings.CutPrefix(l, "PYTHONPATH="); ok {
			lines[i], found = "PYTHONPATH="+dir+":"+v, true
		}
	}
	if !found {
		t.Fatalf("%s has no PYTHONPATH", envList)
	}
	out := filepath.Join(t.TempDir(), "env.list")
	if err := os.WriteFile(out, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}
