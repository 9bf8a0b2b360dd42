package search

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/memory"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// dsMoE125MArgs are the model and MoE flags of Megatron-DeepSpeed's
// examples_deepspeed/MoE/ds_pretrain_gpt_125M_MoE64.sh
// (microsoft/Megatron-DeepSpeed f4157bea69f3df8c6cb66f2ebcda66ba03d1288e,
// its megatron_options and deepspeed_options as the script expands them;
// conformance corpus line mds-moe-125m-64experts).
var dsMoE125MArgs = strings.Fields(`--tensor-model-parallel-size 1 --moe-expert-parallel-size 8 --num-experts 64
	--moe-loss-coeff 0.01 --moe-train-capacity-factor 1.0 --moe-eval-capacity-factor 1.0 --moe-min-capacity 4
	--micro-batch-size 4 --global-batch-size 256 --num-layers 12 --hidden-size 768 --num-attention-heads 12
	--seq-length 2048 --max-position-embeddings 2048 --fp16 --checkpoint-activations --create-moe-param-group
	--vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt --deepspeed --pipeline-model-parallel-size 1
	--no-pipeline-parallel --deepspeed-activation-checkpointing`)

// The script's flags read as Megatron-DeepSpeed runs them: 64 experts in
// every second layer (--expert-interval 2: layers 2, 4, ... 12, 1-based),
// top-1 routing, capacity factor 1, EP 8 with whole experts (ETP 1).
func TestDeepSpeedMoEFlagsRead(t *testing.T) {
	m, fx, found, err := megatron.ModelFromArgs(dsMoE125MArgs)
	if err != nil || !found {
		t.Fatalf("found %v err %v", found, err)
	}
	var moeLayers []int
	for i := range m.NumLayers {
		if m.IsMoELayer(i) {
			moeLayers = append(moeLayers, i)
		}
	}
	if m.NumExperts != 64 || m.MoETopK() != 1 || m.CapacityFactor != 1 || m.ExpertFFN() != 3072 ||
		!slices.Equal(moeLayers, []int{1, 3, 5, 7, 9, 11}) {
		t.Errorf("MoE read as %+v, MoE layers %v (want 64 experts, top-1, capacity 1, FFN 3072, layers 1,3,...,11)", m.MoE, moeLayers)
	}
	if !fx.DeepSpeedMoE || fx.EP != 8 || fx.ETP != 1 || fx.ExpertTP {
		t.Errorf("constraints %+v: want DeepSpeed MoE, EP 8, ETP 1", fx)
	}
}

// The 125M/64-expert model planned for DeepSpeed on 4 hosts x 8 A100s
// with ZeRO-1: the script's EP 8 is kept, and by hand:
//
// Memory. An expert is 2 x 768 x 3072 = 4,718,592 parameters; each GPU
// holds 64/8 = 8 experts of each of the 6 MoE layers: 226,492,416 expert
// parameters. DeepSpeed's ZeRO-1 shards their fp32 states (12 B) over the
// expert-data-parallel group, 32 / 8 = 4 ranks, and the rest over all 32:
// optimizer bytes = 12 x ((P - 226,492,416)/32 + 226,492,416/4).
//
// Expert all-to-all. One dispatch sends the GPU's 2048 x 4 tokens x top-1
// x 768 x 2 B = 12,582,912 B; the 8 ranks of an EP group are consecutive,
// so one host: 7/8 of it (11,010,048 B) crosses NVSwitch. Each of the 6
// MoE layers runs a dispatch and a combine forward, again when
// --checkpoint-activations (full recompute) re-runs the forward, and again
// backward, for each of 256 / (4 x 32) = 2 micro-batches: 72 all-to-alls
// per step.
func TestDeepSpeedMoEPlanByHand(t *testing.T) {
	m, fx, _, err := megatron.ModelFromArgs(dsMoE125MArgs)
	if err != nil {
		t.Fatal(err)
	}
	fx.ZeroStage = 1
	c := testCluster([]islandDef{{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	res, err := Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 256, Fixed: fx, TopK: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plans[0]
	if ep, etp := p.ExpertParallel(); ep != 8 || etp != 1 || p.DP != 32 || p.MicroBatch != 4 || p.ZeroStage != 1 {
		t.Fatalf("plan %+v: want EP 8 ETP 1 DP 32 micro-batch 4 ZeRO-1", p.Config)
	}
	cfg := memory.WithStages(m, p.Config)
	const pe = 6 * 8 * 2 * 768 * 3072
	if got := memory.StageExpertParams(m, cfg, 0); got != pe {
		t.Errorf("expert parameters per GPU %.0f, by hand %d", got, pe)
	}
	P := memory.StageParameters(m, cfg, 0)
	want := 12 * ((P-pe)/32 + pe/4.0)
	if got := memory.EstimateStage(m, cfg, parallel.FrameworkDeepSpeed, 0).Optimizer; math.Abs(got-want) > 1 {
		t.Errorf("ZeRO-1 optimizer bytes %.0f, by hand %.0f (sharded as dense: %.0f)", got, want, 12*P/32)
	}
	if got := moeAllToAllBytes(m, p.Config); got != 12582912 {
		t.Errorf("%.0f B per dispatch, by hand 12,582,912", got)
	}
	one := 11010048/c.LinkBetween(0, 0).BytesPerS + c.LinkBetween(0, 0).LatencyS
	if got, want := p.Predicted.Breakdown.EP, 72*one; math.Abs(got-want) > 1e-9 {
		t.Errorf("expert all-to-all %.1f us per step, by hand 72 x %.2f us = %.1f us", got*1e6, one*1e6, want*1e6)
	}
}

// What DeepSpeed refuses is refused, naming the flag: experts not divisible
// by --moe-expert-parallel-size (moe/layer.py), ZeRO-3 with MoE layers
// (runtime/engine.py), and an EP that does not divide the ranks of a
// pipeline stage (utils/groups.py).
func TestDeepSpeedMoERefusals(t *testing.T) {
	with := func(flag, v string) []string {
		out := append([]string(nil), dsMoE125MArgs...)
		for i := range out {
			if out[i] == flag {
				out[i+1] = v
			}
		}
		return out
	}
	if _, _, _, err := megatron.ModelFromArgs(with("--moe-expert-parallel-size", "6")); err == nil ||
		!strings.Contains(err.Error(), "--moe-expert-parallel-size") || !strings.Contains(err.Error(), "64 experts") {
		t.Errorf("EP 6 of 64 experts: %v", err)
	}
	m, fx, _, err := megatron.ModelFromArgs(dsMoE125MArgs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := parallel.Config{TP: 1, PP: 1, DP: 32, CP: 1, VPP: 1, MicroBatch: 4, GlobalBatch: 256, NumMicroBatches: 2, EP: 8, ETP: 1, ZeroStage: 3}
	if err := validate(m, cfg, parallel.FrameworkDeepSpeed, 32); err == nil || !strings.Contains(err.Error(), "Stage 3") {
		t.Errorf("ZeRO-3: %v", err)
	}
	cfg.ZeroStage, cfg.EP, cfg.DP = 0, 64, 32
	if err := validate(m, cfg, parallel.FrameworkDeepSpeed, 32); err == nil || !strings.Contains(err.Error(), "consecutive ranks") {
		t.Errorf("EP 64 on 32 ranks: %v", err)
	}
	fx.EP = 16
	c := testCluster([]islandDef{{hosts: 1, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	_, err = Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 256, Fixed: fx})
	if err == nil || !strings.Contains(err.Error(), "utils/groups.py") {
		t.Errorf("EP 16 on 8 GPUs: %v", err)
	}
	// ZeRO-1 without --create-moe-param-group: DeepSpeed's ZeRO optimizer
	// asserts a param group is marked MoE.
	noGroup := slices.DeleteFunc(slices.Clone(dsMoE125MArgs), func(s string) bool { return s == "--create-moe-param-group" })
	_, fx1, _, err := megatron.ModelFromArgs(noGroup)
	if err != nil {
		t.Fatal(err)
	}
	fx1.ZeroStage = 1
	if _, err = Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 256, Fixed: fx1}); err == nil ||
		!strings.Contains(err.Error(), "--create-moe-param-group") {
		t.Errorf("ZeRO-1 without a MoE param group: %v", err)
	}
	// A DeepSpeed plan of an MoE model nothing renders the experts of.
	fx.DeepSpeedMoE, fx.EP, fx.ETP = false, 0, 0
	if _, err = Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 256, Fixed: fx}); err == nil ||
		!strings.Contains(err.Error(), "Megatron-DeepSpeed") {
		t.Errorf("MoE preset for DeepSpeed: %v", err)
	}
}

// With TP 2 and whole experts, DeepSpeed drops each TP rank to half of the
// dispatched tokens and all-gathers the expert output over TP afterwards
// (sharded_moe.py drop_tokens / gather_tokens). By hand, micro-batch 4 x
// 2048 tokens, top-1, capacity 1, h 768, fp16: the TP rank routes 4096
// token slots of the 8192, its dispatch sends 4096 x 768 x 2 =
// 6,291,456 B, 7/8 of them over NVSwitch to the other members of its EP
// group (8 ranks, 4 TP blocks of one host); the gather moves half of the
// 8192 x 768 x 2 = 12,582,912 B buffer in. Per MoE layer forward: 2
// all-to-alls + 1 all-gather; backward the same again, plus the forward's
// once more (--checkpoint-activations: full recompute).
func TestDeepSpeedMoEDropTokensOverTP(t *testing.T) {
	m, fx, _, err := megatron.ModelFromArgs(dsMoE125MArgs)
	if err != nil {
		t.Fatal(err)
	}
	c := testCluster([]islandDef{{hosts: 4, gpus: 8, gpu: gpuA100, intraGBs: 300, nicGbit: 1600}}, 0)
	fx.TP = 2
	res, err := Search(c, m, Options{Framework: parallel.FrameworkDeepSpeed, GlobalBatch: 256, Fixed: fx, TopK: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := res.Plans[0].Config
	if !cfg.DropTokensTP || cfg.TP != 2 || cfg.ETP != 1 || cfg.EP != 8 {
		t.Fatalf("plan %+v: want TP 2, whole experts over EP 8, tokens dropped over TP", cfg)
	}
	if got := memory.RoutedTokens(m, cfg, 8192); got != 4096 {
		t.Errorf("routed token slots per GPU %.0f, by hand 4096", got)
	}
	if got := moeAllToAllBytes(m, cfg); got != 6291456 {
		t.Errorf("%.0f B per dispatch, by hand 6,291,456", got)
	}
	e := newPlanEval(c, m, cfg, parallel.FrameworkDeepSpeed)
	l := c.LinkBetween(0, 0)
	a2a := 6291456*7.0/8/l.BytesPerS + l.LatencyS
	ag := 12582912.0/2/l.BytesPerS + l.LatencyS
	if f, b := e.moeA2APerLayer([]int{0, 0, 0, 0}); math.Abs(f-(2*a2a+ag)) > 1e-12 || math.Abs(b-2*f) > 1e-12 {
		t.Errorf("per MoE layer fwd %.2f us bwd %.2f us, by hand 2 x %.2f + %.2f us", f*1e6, b*1e6, a2a*1e6, ag*1e6)
	}
}
