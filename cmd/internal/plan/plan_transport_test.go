package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// TestPlanShowsTransportPerGroupType: on the two-cluster example with the
// hosts' versions recorded, plan 1 keeps RDMA inside the InfiniBand island
// for TP and DP and names sockets for the pipeline; without versions it
// says why everything runs on sockets.
func TestPlanShowsTransportPerGroupType(t *testing.T) {
	t.Parallel()
	path := cmdtest.TwoClustersWithVersions(t)
	for _, tc := range []struct{ file, want string }{
		{path, "plan 1 NCCL transport (--nccl-mode auto): one NCCL network per group type (ib: tp IB, cp IB, dp IB, pp Socket, embd Socket; eth: tp Socket"},
		{"../../../examples/two-clusters.yaml", "plan 1 NCCL transport (--nccl-mode auto): TCP sockets for every group\n  (RDMA is not kept inside islands: versions unknown (NCCL on ib"},
	} {
		var out bytes.Buffer
		if err := Run(planOpts(&out, func(o *Options) {
			o.ClusterFile, o.Model, o.GlobalBatch, o.NCCLMode = tc.file, "llama2-7b", 64, "auto"
			// On the H100s alone plan 1 is faster and has one island: the
			// transports across islands are this test's subject.
			o.UseAllGPUs = true
		})); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output lacks %q:\n%s", tc.file, tc.want, out.String())
		}
	}
}
