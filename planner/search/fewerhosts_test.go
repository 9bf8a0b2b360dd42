package search

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// a100Zones is Sailor's A100-40GB nodes (4 GPUs, 2.42 GB/s between nodes of
// a zone; bench/sailor) in zones of the given host counts, joined by
// interGbit.
func a100Zones(t *testing.T, interGbit float64, hosts ...int) *cluster.Cluster {
	t.Helper()
	var b strings.Builder
	b.WriteString("clusters:\n")
	for i, n := range hosts {
		fmt.Fprintf(&b, "  - name: z%d\n    hosts: z%d-[01-%02d]\n    gpus_per_host: 4\n    gpu: {model: A100-40GB-SXM}\n"+
			"    intra_host: {type: nvlink, bandwidth_gbyte_per_s: 243}\n    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 19}]\n", i, i, n)
	}
	if len(hosts) > 1 {
		b.WriteString("links:\n")
		for i := range hosts {
			for j := i + 1; j < len(hosts); j++ {
				fmt.Fprintf(&b, "  - {between: [z%d, z%d], type: ethernet, bandwidth_gbit_per_s: %g}\n", i, j, interGbit)
			}
		}
	}
	return resolveFile(t, []byte(b.String()))
}

func opt350m(t *testing.T) model.Model {
	t.Helper()
	_, m := sailorScenario(t)
	return m
}

// sailorOpts plans as bench/sailor scores: DeepSpeed, fp32, no recompute,
// global batch 1024.
func sailorOpts(fx parallel.Constraints) Options {
	fx.ZeroStage, fx.Precision, fx.Recompute = -1, gpu.PrecisionFP32, parallel.RecomputeNone
	return Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 1024, Seed: 1, TopK: 3, Fixed: fx}
}

// idleNames is the plan's idle hosts ("" for none).
func idleNames(p Plan) string {
	if p.Idle == nil {
		return ""
	}
	return strings.Join(p.Idle.Hosts, ",")
}

// On 80 A100s (Figure 7 of Sailor's artifact) the only layouts with DP
// dividing the global batch of 1,024 pipeline over 5 stages; 64 GPUs run
// TP1 DP64 with no pipeline bubble, faster, and the plan says so.
func TestFewerHostsWhenFaster(t *testing.T) {
	c, m := a100Zones(t, 0, 20), opt350m(t)
	all, err := Search(c, m, withAll(sailorOpts(parallel.Constraints{})))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Search(c, m, sailorOpts(parallel.Constraints{}))
	if err != nil {
		t.Fatal(err)
	}
	checkPlans(t, c, m, sailorOpts(parallel.Constraints{}), res)
	p, q := res.Plans[0], all.Plans[0]
	if q.Idle != nil || q.PP*q.TP*q.DP != 80 {
		t.Fatalf("--use-all-gpus plan: TP%d PP%d DP%d, idle %v; want all 80 GPUs", q.TP, q.PP, q.DP, q.Idle)
	}
	if p.TP*p.PP*p.DP != 64 || idleNames(p) != "z0-17,z0-18,z0-19,z0-20" || p.Idle.GPUs != 16 {
		t.Fatalf("plan 1: TP%d PP%d DP%d, idle %q; want 64 GPUs, the last 4 hosts idle", p.TP, p.PP, p.DP, idleNames(p))
	}
	if p.Predicted.IterationSeconds >= q.Predicted.IterationSeconds || !strings.Contains(p.Idle.Reason, "faster on 64 of the 80 GPUs") {
		t.Fatalf("plan 1 %.3f s against %.3f s on all; reason %q", p.Predicted.IterationSeconds, q.Predicted.IterationSeconds, p.Idle.Reason)
	}
}

func withAll(o Options) Options {
	o.UseAllGPUs = true
	return o
}

// --pp 7 fits no layout on 80 GPUs (7 does not divide them): the plan runs
// on 56 and names the 6 hosts it leaves idle; --use-all-gpus refuses, as
// before, naming the flag.
func TestFewerHostsWhenNoLayoutUsesAll(t *testing.T) {
	c, m := a100Zones(t, 0, 20), opt350m(t)
	o := sailorOpts(parallel.Constraints{PP: 7})
	res, err := Search(c, m, o)
	if err != nil {
		t.Fatal(err)
	}
	checkPlans(t, c, m, o, res)
	p := res.Plans[0]
	if p.PP != 7 || p.TP*p.PP*p.DP != 56 || idleNames(p) != "z0-15,z0-16,z0-17,z0-18,z0-19,z0-20" ||
		!strings.Contains(p.Idle.Reason, "no layout uses all 80 GPUs") || !strings.Contains(p.Idle.Reason, "--pp 7") {
		t.Fatalf("plan 1: TP%d PP%d DP%d, idle %q (%v)", p.TP, p.PP, p.DP, idleNames(p), p.Idle)
	}
	_, err = Search(c, m, withAll(o))
	var ce *ConstraintError
	if !errors.As(err, &ce) || ce.Flag != "pp" {
		t.Fatalf("--use-all-gpus --pp 7: error %v, want the --pp constraint error", err)
	}
}

// Two zones joined by a slow link (0.5 Gbit/s): every layout across it
// waits on it, so the plan keeps one zone and leaves the other idle.
func TestFewerHostsDropsSlowIsland(t *testing.T) {
	c, m := a100Zones(t, 0.5, 4, 4), opt350m(t)
	o := sailorOpts(parallel.Constraints{})
	res, err := Search(c, m, o)
	if err != nil {
		t.Fatal(err)
	}
	checkPlans(t, c, m, o, res)
	all, err := Search(c, m, withAll(o))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	if idleNames(p) != "z1-01,z1-02,z1-03,z1-04" || p.Predicted.IterationSeconds >= all.Plans[0].Predicted.IterationSeconds {
		t.Fatalf("plan 1 idle %q, %.3f s; on both zones %.3f s", idleNames(p), p.Predicted.IterationSeconds, all.Plans[0].Predicted.IterationSeconds)
	}
}

// One rule for DeepSpeed's pipeline, as for Megatron's: any PP up to the
// layer count, the split rendered when uneven (PIPETTE_PIPELINE_LAYERS).
// OPT-350M's 24 layers over PP 5 on all 80 GPUs used to be refused as
// "DeepSpeed's pipeline needs the 24 layers to divide evenly by PP".
func TestDeepSpeedPPNeedNotDivideLayers(t *testing.T) {
	c, m := a100Zones(t, 0, 20), opt350m(t)
	res, err := Search(c, m, withAll(sailorOpts(parallel.Constraints{PP: 5})))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	sum := 0
	for _, n := range p.StageLayers {
		sum += n
	}
	if p.PP != 5 || len(p.StageLayers) != 5 || sum != 24 || p.Idle != nil {
		t.Fatalf("plan 1: PP%d layers %v idle %v; want PP 5 over all 24 layers on every GPU", p.PP, p.StageLayers, p.Idle)
	}
}

// The prefixes tried: none on a cluster where a layout with the smallest
// model-parallel size that fits already uses every GPU (the 1,024-GPU
// benchmark), the count with twice the DP on 80 A100s, island boundaries.
func TestPrefixSizes(t *testing.T) {
	big := testCluster([]islandDef{{hosts: 128, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	bigO := Options{Framework: parallel.FrameworkMegatron, GlobalBatch: 1536}
	res, err := searchEveryHost(big, gpt3_175b, bigO)
	if err != nil {
		t.Fatal(err)
	}
	c80, m := a100Zones(t, 0, 20), opt350m(t)
	zones := a100Zones(t, 1, 8, 8, 8)
	for _, tc := range []struct {
		name  string
		c     *cluster.Cluster
		m     model.Model
		o     Options
		floor int
		want  []int
	}{
		{"1024 GPUs", big, gpt3_175b, bigO, res.fitMP, nil},
		{"80 A100", c80, m, sailorOpts(parallel.Constraints{}), 1, []int{16}},
		{"80 A100 --pp 7", c80, m, sailorOpts(parallel.Constraints{PP: 7}), 1, []int{14}},
		{"3 zones x 32", zones, m, sailorOpts(parallel.Constraints{}), 1, []int{16, 8}},
	} {
		if got := prefixSizes(tc.c, tc.m, tc.o, hostRanking(tc.c), tc.floor); !slices.Equal(got, tc.want) {
			t.Errorf("%s: prefixes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Islands rank by GPU speed, then by how well they join the others.
func TestIslandRanking(t *testing.T) {
	hetero := testCluster([]islandDef{
		{hosts: 2, gpus: 8, gpu: gpuA10, intraGBs: 32, nicGbit: 100},
		{hosts: 2, gpus: 8, gpu: gpuH100, intraGBs: 450, nicGbit: 3200},
	}, 25)
	if got := islandRanking(hetero); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("H100 and A10 islands ranked %v, want the H100s first", got)
	}
	// Three equal zones; c joins the others at 10 Gbit/s, a and b each other at 1.
	var b strings.Builder
	b.WriteString("clusters:\n")
	for _, z := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "  - name: %s\n    hosts: %s-[1-2]\n    gpus_per_host: 4\n    gpu: {model: A100-40GB-SXM}\n    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 19}]\n", z, z)
	}
	b.WriteString("links:\n  - {between: [a, b], type: ethernet, bandwidth_gbit_per_s: 1}\n" +
		"  - {between: [a, c], type: ethernet, bandwidth_gbit_per_s: 10}\n  - {between: [b, c], type: ethernet, bandwidth_gbit_per_s: 10}\n")
	c := resolveFile(t, []byte(b.String()))
	if got := islandRanking(c); !slices.Equal(got, []int{2, 0, 1}) {
		t.Errorf("zones ranked %v, want c (best joined) first", got)
	}
}
