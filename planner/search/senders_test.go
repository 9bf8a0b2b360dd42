package search

import (
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/planner/parallel"
)

// sendersCluster: two hosts of 4 A100s whose 48 Gbit/s NIC one GPU drives
// at 16 Gbit/s and two at 24 (a senders table, as Sailor measured A100
// nodes on GCP); without the table every count gets the 48.
const sendersCluster = `
clusters:
  - name: a
    hosts: a[1-2]
    gpus_per_host: 4
    gpu: {model: A100-40GB-SXM}
    nics: [{type: ethernet, count: 1, rate_gbit_per_s: 48, senders: [{gpus: 1, rate_gbit_per_s: 16}, {gpus: 2, rate_gbit_per_s: 24}]}]
`

// The TP ranks of a block send at once and split what that many senders
// reach (tpShare); a data-parallel group's own members on a host count as
// one sender, so the hierarchical all-reduce's k sub-rings split one
// GPU's rate. By hand, in bytes/s (48 Gbit/s = 6e9):
//   - TP 4: all four send, 6e9 / 4 = 1.5e9 per rank;
//   - TP 2: 24 Gbit/s = 3e9, / 2 = 1.5e9;
//   - TP 1: 16 Gbit/s = 2e9, and the hierarchical form's inter-host
//     sub-rings of a DP 8 group (4 members a host) 2e9 / 4 = 5e8 each.
//
// Without the table TP 1 gets all 6e9.
func TestLinkSharedByTheTPSenders(t *testing.T) {
	c := resolveFile(t, []byte(sendersCluster))
	plain := resolveFile(t, []byte(strings.Replace(sendersCluster,
		`, senders: [{gpus: 1, rate_gbit_per_s: 16}, {gpus: 2, rate_gbit_per_s: 24}]`, "", 1)))
	for _, tc := range []struct {
		name       string
		tp, dp     int
		link, ring float64 // e.link(0, 1) and the hierarchical inter-host sub-ring (0: none)
		plainLink  float64
	}{
		{"TP 4", 4, 2, 1.5e9, 0, 1.5e9},
		{"TP 2", 2, 4, 1.5e9, 0, 3e9},
		{"TP 1", 1, 8, 2e9, 5e8, 6e9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parallel.Config{TP: tc.tp, PP: 1, DP: tc.dp, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: tc.dp, NumMicroBatches: 1}
			e := newPlanEval(c, gpt3_175b, cfg, parallel.FrameworkDeepSpeed)
			if got := e.link(0, 1).BytesPerS; !approx(got, tc.link, 1e-12) {
				t.Errorf("link %g B/s per rank, want %g", got, tc.link)
			}
			if got := newPlanEval(plain, gpt3_175b, cfg, parallel.FrameworkDeepSpeed).link(0, 1).BytesPerS; !approx(got, tc.plainLink, 1e-12) {
				t.Errorf("without the table: link %g B/s per rank, want %g", got, tc.plainLink)
			}
			if tc.ring == 0 {
				return
			}
			hosts := make([]int, tc.dp)
			for i := range hosts {
				hosts[i] = i / (tc.dp / 2)
			}
			r := e.dpRingOf(hosts)
			if r.k != tc.dp/2 || !approx(r.inter.BytesPerS, tc.ring, 1e-12) {
				t.Errorf("hierarchical ring: %d members a host, sub-rings at %g B/s; want %d, %g", r.k, r.inter.BytesPerS, tc.dp/2, tc.ring)
			}
		})
	}
}
