package search

import (
	"math"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/megatron"
	"github.com/pipette-launch/pipette-launch/planner/model"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// TestMoEAllToAllVolumeByHand: Mixtral 8x7B, micro-batch 1, sequence 4096,
// top-2, hidden 4096, bf16. One GPU's dispatch sends its local tokens x 2
// copies x 4096 x 2 B: TP1 -> 4096*2*4096*2 = 67,108,864 B, of which
// (EP-1)/EP = 7/8 = 58,720,256 B leave the GPU; with TP2 and sequence
// parallelism each GPU routes half the tokens: 33,554,432 B. Per MoE
// layer the forward runs a dispatch and a combine, the backward both again.
//
// Time: EP8 inside one DGX H100 (NVSwitch 450 GB/s, 5 us): 58,720,256 /
// 450e9 + 5e-6 = 135.5 us per all-to-all. EP8 over 8 hosts, one member
// each: all 58,720,256 B cross the NIC, and all 8 GPUs of a host share its
// 8x400 Gbit/s = 400 GB/s: 50 GB/s each: 1,174.4 us + 5 us.
func TestMoEAllToAllVolumeByHand(t *testing.T) {
	m, _ := model.Preset("mixtral-8x7b")
	cfg := parallel.Config{TP: 1, PP: 1, DP: 64, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 64, NumMicroBatches: 1, EP: 8, ETP: 1}
	if got := moeAllToAllBytes(m, cfg); got != 67108864 {
		t.Errorf("TP1: %.0f B per dispatch, by hand 67,108,864", got)
	}
	tp2 := cfg
	tp2.TP, tp2.DP, tp2.SequenceParallel = 2, 32, true
	if got := moeAllToAllBytes(m, tp2); got != 33554432 {
		t.Errorf("TP2+SP: %.0f B per dispatch, by hand 33,554,432", got)
	}
	c := h100Cluster64()
	e := newPlanEval(c, m, cfg, parallel.FrameworkMegatron)
	inHost := e.a2aSeconds([]int{0, 0, 0, 0, 0, 0, 0, 0}, 8, 67108864)
	if want := 58720256/450e9 + 5e-6; math.Abs(inHost-want) > 1e-9 {
		t.Errorf("EP8 in one host: %.2f us, by hand %.2f us", inHost*1e6, want*1e6)
	}
	spread := e.a2aSeconds([]int{0, 1, 2, 3, 4, 5, 6, 7}, 8, 67108864)
	if want := 58720256/50e9 + 5e-6; math.Abs(spread-want) > 1e-9 {
		t.Errorf("EP8 over 8 hosts: %.2f us, by hand %.2f us", spread*1e6, want*1e6)
	}
	// Per layer and micro-batch: dispatch + combine each way (ETP 1: no
	// gather), so 2 all-to-alls forward and 2 backward.
	f, b := e.moeA2APerLayer([]int{0, 0, 0, 0, 0, 0, 0, 0})
	if math.Abs(f-2*inHost) > 1e-12 || math.Abs(b-2*inHost) > 1e-12 {
		t.Errorf("per layer fwd %.2f us bwd %.2f us, want 2 x %.2f us each", f*1e6, b*1e6, inHost*1e6)
	}
}

// TestMoEFlagsFromMegatronArgs reads a real Megatron MoE command line
// (zyzshishui/slime scripts/models/qwen3-30B-A3B.sh, the MODEL_ARGS array,
// plus the parallel flags of its run script).
func TestMoEFlagsFromMegatronArgs(t *testing.T) {
	args := strings.Fields(`--disable-bias-linear --qk-layernorm --group-query-attention --num-attention-heads 32
		--num-query-groups 4 --kv-channels 128 --num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144
		--normalization RMSNorm --position-embedding-type rope --norm-epsilon 1e-6 --rotary-percent 1.0 --swiglu
		--untie-embeddings-and-output-weights --vocab-size 151936 --rotary-base 1000000
		--moe-ffn-hidden-size 768 --moe-router-score-function softmax --moe-token-dispatcher-type alltoall
		--moe-router-topk 8 --moe-layer-freq ([1]*48) --num-experts 128 --moe-grouped-gemm
		--moe-token-drop-policy probs --moe-router-dtype fp32 --moe-permute-fusion --moe-aux-loss-coeff 0
		--seq-length 4096 --tensor-model-parallel-size 4 --sequence-parallel --expert-model-parallel-size 8
		--expert-tensor-parallel-size 1`)
	m, fx, found, err := megatron.ModelFromArgs(args)
	if err != nil || !found {
		t.Fatalf("found %v err %v", found, err)
	}
	p, _ := model.Preset("qwen3-30b-a3b")
	if m.Parameters() != p.Parameters() || m.ActiveParameters() != p.ActiveParameters() {
		t.Errorf("parameters %d / active %d, preset %d / %d", m.Parameters(), m.ActiveParameters(), p.Parameters(), p.ActiveParameters())
	}
	if m.NumExperts != 128 || m.MoETopK() != 8 || m.ExpertFFN() != 768 || m.MoELayers() != 48 || m.HeadDim() != 128 {
		t.Errorf("MoE read as %+v, head dim %d", m.MoE, m.HeadDim())
	}
	if fx.EP != 8 || fx.ETP != 1 || fx.TP != 4 {
		t.Errorf("constraints EP %d ETP %d TP %d, want 8 1 4", fx.EP, fx.ETP, fx.TP)
	}
	if w := megatron.UnmodelledFeatures(args); len(w) != 0 {
		t.Errorf("modelled MoE flags warned about: %q", w)
	}
	// --moe-shared-expert-intermediate-size and a leading dense layer
	// (DeepSeek-V2-Lite's Megatron form).
	lite := strings.Fields(`--num-layers 27 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 --vocab-size 102400
		--ffn-hidden-size 10944 --swiglu --num-experts 64 --moe-router-topk 6 --moe-ffn-hidden-size 1408
		--moe-shared-expert-intermediate-size 2816 --moe-layer-freq ([0]*1+[1]*26)`)
	if m, _, _, err := megatron.ModelFromArgs(lite); err != nil || m.DenseFirst != 1 || m.MoELayers() != 26 || m.SharedFFN != 2816 {
		t.Errorf("lite: %+v, %v", m.MoE, err)
	}
}

func TestParseMoELayerFreq(t *testing.T) {
	cases := []struct {
		in           string
		layers       int
		freq, dense  int
		errSubstring string
	}{
		{"1", 4, 1, 0, ""},
		{"2", 4, 2, 0, ""},
		{"'([0]*3+[1]*27)'", 30, 1, 3, ""},
		{"[1,0,1,0]", 4, 2, 0, ""},
		{"([0]*1+[1]*26)", 27, 1, 1, ""},
		{"([1]*3)", 4, 0, 0, "lists 3 layers"},
		{"[1,1,0,1]", 4, 0, 0, "not of that form"},
		{"[0,0]", 2, 0, 0, "no layer MoE"},
		{"[2]*4", 4, 0, 0, "0 or 1"},
		{"0", 4, 0, 0, "positive"},
	}
	for _, c := range cases {
		f, d, err := megatron.ParseMoELayerFreq(c.in, c.layers)
		switch {
		case c.errSubstring == "" && (err != nil || f != c.freq || d != c.dense):
			t.Errorf("%s: (%d, %d, %v), want (%d, %d)", c.in, f, d, err, c.freq, c.dense)
		case c.errSubstring != "" && (err == nil || !strings.Contains(err.Error(), c.errSubstring)):
			t.Errorf("%s: error %v, want %q", c.in, err, c.errSubstring)
		}
	}
}

func TestMoEModelYAML(t *testing.T) {
	doc := `name: my-moe
num_layers: 27
hidden_size: 2048
num_attention_heads: 16
num_query_groups: 8
kv_channels: 128
ffn_hidden_size: 10944
swiglu: true
seq_length: 4096
vocab_size: 102400
num_experts: 64
moe_router_topk: 6
moe_ffn_hidden_size: 1408
moe_shared_expert_intermediate_size: 2816
moe_dense_first_layers: 1
moe_expert_capacity_factor: 1.25
`
	m, err := model.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if m.NumExperts != 64 || m.MoETopK() != 6 || m.MoELayers() != 26 || m.CapacityFactor != 1.25 || m.KVChannels != 128 {
		t.Errorf("parsed %+v", m)
	}
	for _, bad := range []struct{ doc, want string }{
		{strings.Replace(doc, "moe_router_topk: 6", "moe_router_topk: 65", 1), "moe_router_topk"},
		{strings.Replace(doc, "num_experts: 64", "num_experts: 0", 1), "num_experts"},
		{strings.Replace(doc, "moe_dense_first_layers: 1", "moe_dense_first_layers: 27", 1), "moe_dense_first_layers"},
		{strings.Replace(doc, "moe_expert_capacity_factor: 1.25", "moe_expert_capacity_factor: -1", 1), "moe_expert_capacity_factor"},
	} {
		if _, err := model.Parse([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want one naming %s", err, bad.want)
		}
	}
}
