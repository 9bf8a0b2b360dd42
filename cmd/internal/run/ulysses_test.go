package run

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// Megatron-DeepSpeed's DeepSpeed-Ulysses example (--ds-sequence-parallel-size
// 4 on 8 GPUs, train_batch_size 2 = micro-batch 1 x DP 2) planned on a
// cluster file: the 4 sequence-parallel ranks are taken out of DP, the
// user's config is kept, and the flag reaches the ranks once, unchanged.
func TestUlyssesLinePlannedOnAClusterFile(t *testing.T) {
	p := prepareCorpusLine(t, "mds-ulysses-1.3b-32k")
	cluster := filepath.Join(cmdtest.Testdata, "a100-16x8.yaml")
	code, stdout, stderr := cmdtest.Run(testApp(nil), append([]string{"--dry-run", "--json", "--cluster", cluster, "--nnodes", "1"}, p.Args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var job dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &job); err != nil {
		t.Fatal(err)
	}
	if job.Plan == nil || job.Plan.DP != 2 || !strings.Contains(job.Summary, "DP 2 SP 4") {
		t.Errorf("plan %+v, summary %q: want DP 2 beside SP 4", job.Plan, job.Summary)
	}
	for _, h := range job.Hosts {
		for _, r := range h.Ranks {
			argv := r.Argv[slices.Index(r.Argv, p.Line.Expect.Script)+1:]
			if n := strings.Count(strings.Join(argv, " "), "--ds-sequence-parallel-size 4"); n != 1 {
				t.Fatalf("rank %d: --ds-sequence-parallel-size 4 appears %d times in %q", r.Rank, n, argv)
			}
			if len(argv) > 0 && strings.HasPrefix(argv[0], "--local_rank=") {
				argv = argv[1:]
			}
			if len(argv) < len(p.ScriptArgs) || !slices.Equal(argv[:len(p.ScriptArgs)], p.ScriptArgs) {
				t.Fatalf("rank %d: the script's arguments changed: %q", r.Rank, argv)
			}
		}
	}
}
