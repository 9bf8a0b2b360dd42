package run

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
)

// Megatron-DeepSpeed's 125M model with 64 experts (--num-experts 64
// --moe-expert-parallel-size 8 --deepspeed) planned on a cluster file of 4
// hosts x 8 GPUs: DeepSpeed builds the EP groups inside the 32 data-parallel
// ranks, so the plan keeps the script's EP 8, TP 1 and the config's batch
// sizes, and every rank gets the script's arguments unchanged with the
// expert flags once each and none of Megatron-Core's.
func TestMegatronDeepSpeedMoELinePlannedOnAClusterFile(t *testing.T) {
	cluster, err := filepath.Abs("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := prepareCorpusLine(t, "mds-moe-125m-64experts")
	code, stdout, stderr := cmdtest.Run(testApp(nil), append([]string{"--dry-run", "--json", "--no-check-script", "--cluster", cluster}, p.Args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var job dryRunJSON
	if err := json.Unmarshal([]byte(stdout), &job); err != nil {
		t.Fatal(err)
	}
	if job.Plan == nil || job.Plan.EP != 8 || job.Plan.TP != 1 || job.Plan.PP != 1 || job.Plan.DP != 32 ||
		!strings.Contains(job.Summary, "EP 8 ETP 1") {
		t.Fatalf("plan %+v, summary %q: want TP 1 PP 1 DP 32 EP 8 ETP 1", job.Plan, job.Summary)
	}
	ranks := 0
	for _, h := range job.Hosts {
		for _, r := range h.Ranks {
			ranks++
			argv := r.Argv[slices.Index(r.Argv, p.Line.Expect.Script)+1:]
			joined := " " + strings.Join(argv, " ") + " "
			for _, f := range []string{" --moe-expert-parallel-size 8 ", " --num-experts 64 "} {
				if n := strings.Count(joined, f); n != 1 {
					t.Fatalf("rank %d: %q appears %d times in %q", r.Rank, f, n, argv)
				}
			}
			if strings.Contains(joined, "--expert-model-parallel-size") || strings.Contains(joined, "--moe-token-dispatcher-type") {
				t.Fatalf("rank %d: Megatron-Core's expert flags, which Megatron-DeepSpeed does not have: %q", r.Rank, argv)
			}
			if len(argv) > 0 && strings.HasPrefix(argv[0], "--local_rank=") {
				argv = argv[1:]
			}
			if len(argv) < len(p.ScriptArgs) || !slices.Equal(argv[:len(p.ScriptArgs)], p.ScriptArgs) {
				t.Fatalf("rank %d: the script's arguments changed: %q", r.Rank, argv)
			}
		}
	}
	if ranks != 32 {
		t.Errorf("%d ranks, want 32", ranks)
	}
}

// The same line with an expert-parallel size DeepSpeed refuses (the corpus
// line is not edited: the copy here is): 64 experts over EP 6 (its MoE
// layer asserts num_experts % ep_size == 0), and EP 64 on a cluster of 32
// GPUs (groups.py: the EP groups are consecutive ranks of the 32 in a
// pipeline stage). Each is refused before any search, naming the flag.
func TestMegatronDeepSpeedMoEBadExpertParallelSizeRefused(t *testing.T) {
	cluster, err := filepath.Abs("../../../examples/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := prepareCorpusLine(t, "mds-moe-125m-64experts")
	for _, tc := range []struct{ ep, want string }{
		{"6", "--moe-expert-parallel-size: 6 does not divide the 64 experts of --num-experts"},
		{"64", "--moe-expert-parallel-size 64 does not divide the 32 ranks of a pipeline stage"},
	} {
		args := slices.Clone(p.Args)
		i := slices.Index(args, "--moe-expert-parallel-size")
		if i < 0 {
			t.Fatal("the corpus line has no --moe-expert-parallel-size")
		}
		args[i+1] = tc.ep
		code, _, stderr := cmdtest.Run(testApp(nil), append([]string{"--dry-run", "--no-check-script", "--cluster", cluster}, args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("EP %s: exit %d, stderr %q; want it refused with %q", tc.ep, code, stderr, tc.want)
		}
	}
}
