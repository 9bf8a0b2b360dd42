package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func planOpts(out *bytes.Buffer, mod func(*PlanOptions)) *PlanOptions {
	o := &PlanOptions{IO: &IOStreams{Out: out, ErrOut: out}, Model: "gpt3-13b", GlobalBatch: 256, Top: 3, Seed: 1, Framework: "megatron"}
	o.Fixed.ZeroStage = -1
	if mod != nil {
		mod(o)
	}
	return o
}

func TestPlanTableDefaultCluster(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan(planOpts(&out, func(o *PlanOptions) { o.Breakdown = true })); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"gpt3-13b", "RANK", "TFLOP/s/GPU", "LAYERS/STAGE", "breakdown:", "COMPUTE s", "ACTIVATIONS"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(s, "\n1 ") || strings.Contains(s, "naive") {
		t.Fatalf("want a rank-1 row and no naive row on a one-island cluster:\n%s", s)
	}
}

func TestPlanJSONKeys(t *testing.T) {
	var out bytes.Buffer
	if err := runPlan(planOpts(&out, func(o *PlanOptions) { o.JSON = true })); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out.String())
	}
	model := doc["model"].(map[string]any)
	if model["name"] != "gpt3-13b" || model["parameters"].(float64) < 12e9 {
		t.Fatalf("model %v", model)
	}
	plans := doc["plans"].([]any)
	if len(plans) == 0 || len(plans) > 3 {
		t.Fatalf("%d plans, want 1..3", len(plans))
	}
	p := plans[0].(map[string]any)
	for _, k := range []string{"tp", "pp", "dp", "cp", "vpp", "micro_batch_size", "global_batch_size", "num_micro_batches",
		"sequence_parallel", "recompute", "zero_stage", "distributed_optimizer", "offload", "stage_layers", "predicted", "memory", "placement"} {
		if _, ok := p[k]; !ok {
			t.Errorf("plan lacks %q", k)
		}
	}
	sub := func(m map[string]any, key string, keys ...string) {
		x, ok := m[key].(map[string]any)
		if !ok {
			t.Fatalf("%q is not an object", key)
		}
		for _, k := range keys {
			if _, ok := x[k]; !ok {
				t.Errorf("%s lacks %q", key, k)
			}
		}
	}
	sub(p, "offload", "optimizer_fraction", "params")
	sub(p, "predicted", "iteration_seconds", "tokens_per_second", "tflops_per_gpu", "bubble_fraction", "breakdown_seconds")
	sub(p["predicted"].(map[string]any), "breakdown_seconds", "compute", "tp", "pp", "dp", "offload")
	sub(p, "memory", "peak_bytes_per_gpu", "gpu_capacity_bytes", "host_bytes_per_node", "breakdown_bytes")
	sub(p["memory"].(map[string]any), "breakdown_bytes", "weights", "gradients", "optimizer", "activations", "other")
	pl := p["placement"].([]any)
	if len(pl) != 32 {
		t.Fatalf("placement has %d ranks, want 32 (4 hosts x 8)", len(pl))
	}
	for _, k := range []string{"rank", "host", "local_rank", "gpu"} {
		if _, ok := pl[0].(map[string]any)[k]; !ok {
			t.Errorf("placement entry lacks %q", k)
		}
	}
}

func TestPlanTwoIslandsHasNaiveRow(t *testing.T) {
	var out bytes.Buffer
	err := runPlan(planOpts(&out, func(o *PlanOptions) {
		o.ClusterFile = "../../examples/two-clusters.yaml"
		o.Model = "llama3-8b"
		o.GlobalBatch = 64
	}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\nnaive ") {
		t.Fatalf("no naive comparison row:\n%s", out.String())
	}
	t.Log("\n" + out.String())
}

func TestPlanBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badYAML, []byte("clusters: [ {name: a, hosts: \n"), 0o644)
	badModel := filepath.Join(dir, "m.yaml")
	os.WriteFile(badModel, []byte("name: x\nnum_layers: -4\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 128\nvocab_size: 100\n"), 0o644)
	for _, tc := range []struct {
		name string
		mod  func(*PlanOptions)
		want string
	}{
		{"unknown preset", func(o *PlanOptions) { o.Model = "gpt9-1t" }, "gpt9-1t"},
		{"no model", func(o *PlanOptions) { o.Model = "" }, "--model"},
		{"no batch", func(o *PlanOptions) { o.GlobalBatch = 0 }, "--global-batch-size"},
		{"framework", func(o *PlanOptions) { o.Framework = "jax" }, "--framework"},
		{"missing cluster", func(o *PlanOptions) { o.ClusterFile = filepath.Join(dir, "nope.yaml") }, "--cluster"},
		{"malformed cluster", func(o *PlanOptions) { o.ClusterFile = badYAML }, "bad.yaml"},
		{"negative layers", func(o *PlanOptions) { o.Model = badModel }, "num_layers"},
		{"negative tp", func(o *PlanOptions) { o.Fixed.TP = -2 }, "--tp"},
		{"tp not dividing heads", func(o *PlanOptions) { o.Fixed.TP = 3 }, "heads"},
		{"recompute", func(o *PlanOptions) { o.Fixed.Recompute = "most" }, "--recompute"},
		{"seq", func(o *PlanOptions) { o.SeqLength = -1 }, "--seq-length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := runPlan(planOpts(&out, tc.mod))
			var ec cli.ExitCoder
			if !errors.As(err, &ec) || ec.ExitCode() != 2 {
				t.Fatalf("error %v: want exit code 2", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

func TestPlanNoFitExits1WithAdvice(t *testing.T) {
	var out bytes.Buffer
	err := runPlan(planOpts(&out, func(o *PlanOptions) { o.Model = "gpt3-175b"; o.GlobalBatch = 64; o.Fixed.NoOffload = true }))
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 1 {
		t.Fatalf("175B on 32 GPUs without offload: %v, want a no-fit error (exit 1)", err)
	}
	if !strings.Contains(err.Error(), "misses by") || !strings.Contains(err.Error(), "more GPUs") {
		t.Fatalf("no-fit error lacks the miss and advice: %v", err)
	}
}

func TestCompactLayers(t *testing.T) {
	if got := compactLayers([]int{26, 26, 22, 22, 7}); got != "26*2 22*2 7" {
		t.Fatalf("got %q", got)
	}
}

// The flags reach the options: run the command through a cli.App.
func TestPlanCommandFlags(t *testing.T) {
	var out bytes.Buffer
	app := &cli.App{Name: "pipette-launch", Commands: []*cli.Command{newPlanCmd(&IOStreams{Out: &out, ErrOut: &out})},
		ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "256", "--json",
		"--tp", "2", "--recompute", "full", "--top", "2", "--distributed-optimizer=false", "--seed", "3"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plans []struct {
			TP        int    `json:"tp"`
			Recompute string `json:"recompute"`
			DistOpt   bool   `json:"distributed_optimizer"`
		} `json:"plans"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	if len(doc.Plans) != 2 {
		t.Fatalf("%d plans, want --top 2", len(doc.Plans))
	}
	for _, p := range doc.Plans {
		if p.TP != 2 || p.Recompute != "full" || p.DistOpt {
			t.Fatalf("plan %+v ignores --tp 2 --recompute full --distributed-optimizer=false", p)
		}
	}
	err = app.Run([]string{"pipette-launch", "plan", "--model", "gpt3-13b", "--global-batch-size", "256", "--zero-stage", "7"})
	var ec cli.ExitCoder
	if !errors.As(err, &ec) || ec.ExitCode() != 2 {
		t.Fatalf("--zero-stage 7: %v, want exit 2", err)
	}
}
