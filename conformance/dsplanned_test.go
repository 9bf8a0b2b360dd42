package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/conformance/corpus"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// The corpus's DeepSpeed lines planned on a cluster file: the config the
// ranks of the plan read (the file pipette-launch renders or fills, or the
// user's own where the plan keeps it) is read by DeepSpeed's config class
// at the plan's data-parallel size and must derive the batch sizes, ZeRO
// stage and offload the plan reports, and the user's values for every one
// of them the user's config names.

// planClusters are the ways a line is planned: "exact" on a cluster file
// with the line's own hosts and GPUs per host (the plan's world is the one
// the user's config was written for); "example" on examples/cluster.yaml
// (4 hosts x 8 A100 80GB: the plan spreads the user's batch over 32 GPUs
// and DeepSpeed must derive the new accumulation from the same file);
// "example-override" there with --plan-overrides-config, where the plan
// may change the user's batch sizes, ZeRO stage and offload and
// pipette-launch renders the config the ranks read.
var planClusters = []string{"exact", "example", "example-override"}

// clusterFile writes (exact) or names (example) the cluster file a line is
// planned on.
func clusterFile(which string, l *corpus.Line, dir string) (string, error) {
	if which != "exact" {
		return filepath.Abs("../examples/cluster.yaml")
	}
	// examples/cluster.yaml's host kind, with the line's host count and
	// GPUs per host.
	yaml := fmt.Sprintf(`clusters:
  - name: a100
    hosts: a100-[01-%02d]
    gpus_per_host: %d
    gpu:
      model: A100-80GB-SXM
    intra_host:
      type: nvswitch
    nics:
      - type: infiniband
        count: 8
        rate_gbit_per_s: 200
      - type: ethernet
        count: 1
        rate_gbit_per_s: 25
    host_memory_gib: 1024
    cpu_cores: 128
`, l.Expect.Nodes, l.Expect.WorldSize/l.Expect.Nodes)
	p := filepath.Join(dir, "cluster-exact.yaml")
	return p, os.WriteFile(p, []byte(yaml), 0o644)
}

// plannedConfig is one line planned on one cluster file.
type plannedConfig struct {
	name, cluster string
	plan          *parallel.Config
	summary       string
	// rendered: the ranks read a file of the job (pipette-launch generated
	// or filled it), not the user's.
	rendered bool
	err      error // the line could not be planned or its config not found
}

func (p *plannedConfig) id() string { return "plan:" + p.cluster + ":" + p.name }
func (p *plannedConfig) key() string {
	return p.name + "@" + p.cluster
}

// planLine dry-runs a prepared line with --cluster FILE first and returns
// the plan and the DeepSpeed config request for the file its rank 0 reads.
func (h *harness) planLine(t *testing.T, s *corpus.Source, l *corpus.Line, which string) (*plannedConfig, map[string]any) {
	pc := &plannedConfig{name: l.Name, cluster: which}
	root := t.TempDir()
	p, err := s.Prepare(h.corpusDir, l, root)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clusterFile(which, l, root)
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"--cluster", cl}
	if which == "example-override" {
		flags = append(flags, "--plan-overrides-config")
	}
	p.Args = append(flags, p.Args...)
	j, err := h.dryRun(p)
	if err != nil {
		pc.err = fmt.Errorf("not planned: %v", err)
		return pc, nil
	}
	pc.plan, pc.summary = j.Plan, j.Summary
	if j.Plan == nil {
		pc.err = fmt.Errorf("the dry run's JSON has no plan")
		return pc, nil
	}
	argv, _, err := j.rank0(p.Line.Expect.Script)
	if err != nil {
		pc.err = err
		return pc, nil
	}
	path := dsConfigArg(argv)
	if path == "" {
		path = p.Line.Expect.DSConfig // the script names its config itself
	}
	for k, f := range j.Files {
		if f.Path == path || f.Path == filepath.Join(p.Dir, path) {
			pc.rendered = true
			path = filepath.Join(root, fmt.Sprintf("job-file-%d.json", k))
			if err := os.WriteFile(path, []byte(f.Content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(p.Dir, path)
	}
	return pc, map[string]any{"id": pc.id(), "path": path, "dp": j.Plan.DP}
}

// dsConfigArg is the config file a rank's arguments name: DeepSpeed's
// --deepspeed_config / --deepscale_config, else HF Trainer's --deepspeed
// FILE ("" for none).
func dsConfigArg(argv []string) string {
	for _, flag := range []string{"--deepspeed_config", "--deepscale_config", "--deepspeed"} {
		for i, a := range argv {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
			if a == flag && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
				return argv[i+1]
			}
		}
	}
	return ""
}

// plannedVerdict is nil when DeepSpeed accepts the ranks' config and
// derives what the plan reports and, for every value the user's config
// names, the user's value.
func plannedVerdict(pc *plannedConfig, got, user *dsDerived) error {
	switch {
	case pc.err != nil:
		return pc.err
	case got == nil:
		return fmt.Errorf("no result from DeepSpeed's config class")
	case !got.OK:
		return fmt.Errorf("DeepSpeed refuses the config the plan's ranks read: %s", got.Error)
	}
	p := pc.plan
	off := func(on bool) string {
		if on {
			return "cpu"
		}
		return "none"
	}
	want := &dsDerived{Train: p.GlobalBatch, Micro: p.MicroBatch, GAS: p.GlobalBatch / max(p.MicroBatch*p.DP, 1), Stage: p.ZeroStage,
		OffOpt: off(p.Offload.OptimizerFraction > 0), OffPar: off(p.Offload.Params)}
	if got.String() != want.String() {
		return fmt.Errorf("DeepSpeed derives %s from the ranks' config at DP %d; the plan reports %s", got, p.DP, want)
	}
	if user == nil || !user.OK || pc.cluster == "example-override" {
		// Nothing of the user's DeepSpeed could read (checked above), or
		// the plan may change it (--plan-overrides-config).
		return nil
	}
	var differ []string
	for _, k := range user.Set {
		g, u := got.value(k), user.value(k)
		if g != u {
			differ = append(differ, fmt.Sprintf("%s %s (the user's %s)", k, g, u))
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("the plan changes what the user's config names: %s", strings.Join(differ, ", "))
	}
	return nil
}

// value is one derived value by its name in dsDerived.Set.
func (d *dsDerived) value(key string) string {
	return map[string]string{
		"train_batch_size": fmt.Sprint(d.Train), "train_micro_batch_size_per_gpu": fmt.Sprint(d.Micro),
		"gradient_accumulation_steps": fmt.Sprint(d.GAS), "zero_stage": fmt.Sprint(d.Stage),
		"offload_optimizer": d.OffOpt, "offload_param": d.OffPar,
	}[key]
}

// reportPlanned judges every planned line and prints the count.
func reportPlanned(t *testing.T, planned []*plannedConfig, res map[string]*dsDerived) (passed, rendered, renderedOK int) {
	var keys []string
	for _, pc := range planned {
		keys = append(keys, pc.key())
		if pc.rendered {
			rendered++
		}
		verdict := plannedVerdict(pc, res[pc.id()], res["user:"+pc.name])
		if pc.rendered && verdict == nil {
			renderedOK++
		}
		why, expected := dsPlannedExpectedFailures[pc.key()]
		switch {
		case verdict == nil && expected:
			passed++
			t.Errorf("%s: planned, its config passes now: remove it from dsPlannedExpectedFailures (%s)", pc.key(), why)
		case verdict == nil:
			passed++
			t.Logf("%s: DeepSpeed derives what the plan reports (%s; %s)", pc.key(), res[pc.id()], firstLine(pc.summary))
		case expected:
			t.Logf("expected failure %s [%s]: %v", pc.key(), why, verdict)
		default:
			t.Errorf("%s: %v", pc.key(), verdict)
		}
	}
	checkListed(t, dsPlannedExpectedFailures, keys, "dsPlannedExpectedFailures")
	return passed, rendered, renderedOK
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
