package tpoverlap

import (
	"os"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// A --tp-comm-overlap-cfg file is merged over Transformer Engine's defaults
// per GEMM and per key, as initialize_ub merges ub_cfgs.
//
// testdata/tp_overlap/ub_cfg_h100_fp8_h16384_tp8_cp2_mbs1_seqlen8192.yaml is
// NVIDIA/NeMo-Framework-Launcher
// launcher_scripts/conf/training/tp_overlap/ub_cfg_h100_fp8_h16384_tp8_cp2_mbs1_seqlen8192.yaml
// at commit 0937882d3a796237e2943c26088be7d3ea1b00a0, unchanged (0/1 for
// its flags, as NVIDIA writes them).
func TestParse(t *testing.T) {
	real, err := os.ReadFile("testdata/tp_overlap/ub_cfg_h100_fp8_h16384_tp8_cp2_mbs1_seqlen8192.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ring := parallel.TPOverlapGEMM{Method: parallel.TPOverlapRingExchange, NumSM: 1}
	bulk := func(sm int) parallel.TPOverlapGEMM {
		return parallel.TPOverlapGEMM{Method: parallel.TPOverlapBulk, NumSM: sm}
	}
	pipe := func(sm int) parallel.TPOverlapGEMM {
		return parallel.TPOverlapGEMM{Method: parallel.TPOverlapPipeline, NumSM: sm, SetSMMargin: true, NumSplits: 4}
	}
	fromReal := parallel.TPOverlapCfg{
		QKVDgrad: bulk(2), QKVWgrad: bulk(24), FC1Dgrad: bulk(2), FC1Wgrad: bulk(2),
		QKVFprop: ring, ProjDgrad: ring, FC1Fprop: ring, FC2Dgrad: ring,
		ProjFprop: pipe(24), FC2Fprop: pipe(16),
	}
	// A GEMM that only changes its method keeps the default's other keys
	// (TE updates the default dict): proj_fprop as ring exchange on 16 SMs
	// with the margin.
	partial := parallel.DefaultTPOverlap()
	partial.ProjFprop.Method = parallel.TPOverlapRingExchange
	partial.QKVWgrad.SetSMMargin = false
	cases := []struct {
		name, doc string
		want      parallel.TPOverlapCfg
		err       string
	}{
		{"NeMo launcher's 405B FP8 file", string(real), fromReal, ""},
		{"partial", "proj_fprop:\n  method: ring_exchange\nqkv_wgrad:\n  set_sm_margin: false\n", partial, ""},
		{"external wgrad overlaps read, not priced", "proj_wgrad:\n  method: external\n", parallel.DefaultTPOverlap(), ""},
		{"unknown GEMM", "qkv_fwd:\n  method: bulk\n", parallel.TPOverlapCfg{}, `unknown field "qkv_fwd"`},
		{"unknown key", "qkv_fprop:\n  num_sms: 2\n", parallel.TPOverlapCfg{}, `unknown field "num_sms"`},
		{"pipeline all-gather", "fc1_fprop:\n  method: pipeline\n", parallel.TPOverlapCfg{}, "fc1_fprop.method"},
		{"unknown method", "fc2_fprop:\n  method: ring\n", parallel.TPOverlapCfg{}, `got "ring"`},
		{"margin as yes", "fc2_fprop:\n  set_sm_margin: yes\n", parallel.TPOverlapCfg{}, "want true, false, 0 or 1"},
		{"no SMs", "qkv_dgrad:\n  num_sm: 0\n", parallel.TPOverlapCfg{}, "qkv_dgrad.num_sm"},
	}
	for _, c := range cases {
		got, err := Parse([]byte(c.doc))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v\nwant %+v", c.name, got, err, c.want)
		}
	}
}
