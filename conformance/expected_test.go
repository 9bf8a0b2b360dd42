package conformance

import (
	"slices"
	"testing"
)

// What make conformance cannot pass today, in one place: each entry names the
// item of issue 21 ("What broke") that stops it. Fixing an item turns its
// entries green; the run then fails until they are removed from here, so the
// lists stay honest. The corpus test's own list is corpusExpectedFailures in
// cmd/internal/run.

// megatronExpectedFailures are corpus Megatron lines that make conformance
// cannot pass today, with the item of issue 21 that stops them (their dry
// run fails: see cmd/internal/run's corpusExpectedFailures). A listed line
// that passes fails the run.
var megatronExpectedFailures = map[string]string{}

// dsConfigExpectedFailures are corpus lines whose generated DeepSpeed
// config DeepSpeed refuses today, with the item of issue 21 behind it. A
// listed line that passes fails the run.
var dsConfigExpectedFailures = map[string]string{}

// dsPlannedExpectedFailures are corpus lines (name@cluster, see
// planClusters) that cannot be planned on that cluster file, or whose
// planned config DeepSpeed refuses or derives differently from the plan,
// with the reason. A listed line that passes fails the run.
var dsPlannedExpectedFailures = func() map[string]string {
	m := map[string]string{}
	for _, c := range []string{"example", "example-override"} {
		// 1024 / micro 128 = 8 data-parallel ranks at most; BERT is not
		// sized, so it runs in torchrun order even with the override.
		m["mds-bert-pile@"+c] = "train_batch_size 1024 with micro 128 runs on 8 data-parallel ranks at most, not 32 (a BERT model is not sized, so no plan may change it): pipette-launch refuses it as DeepSpeed's batch assertion would"
		// Global 2, micro 1 and SP 4 are 8 ranks; 32 need TP > 1.
		m["mds-ulysses-1.3b-32k@"+c] = "global batch 2 with sequence parallel 4 fills 8 GPUs; on 32 a plan needs TP > 1, which the script fixes at 1: pipette-launch says no plan is valid"
	}
	hf := "HF Trainer's --deepspeed FILE with \"auto\" values, which the Trainer fills from its own arguments before DeepSpeed reads the file (pipette-launch leaves them to it): DeepSpeed's config class alone refuses the file as written"
	hostfile := "the line names its hosts with --hostfile, and pipette-launch refuses --cluster beside it: a planned run takes its hosts from the cluster file"
	for _, c := range planClusters {
		for _, l := range []string{"ds-autotuning-bert-base-z1", "ds-autotuning-bert-base-z3", "ds-autotuning-bert-base-tune", "fastchat-lora-zero2",
			"llava-v1.5-finetune-lora-zero3", "llava-v1.5-finetune-zero3", "llava-v1.5-pretrain-zero2"} {
			m[l+"@"+c] = hf
		}
		for _, l := range []string{"ds-bingbertsquad-4gpu", "mds-azure-benchmark-zero3"} {
			m[l+"@"+c] = hostfile
		}
	}
	return m
}()

// deepSpeedJobExpectedFailures are real jobs that fail today, with the
// item of issue 21 that breaks them. A listed job that passes fails the run.
var deepSpeedJobExpectedFailures = map[string]string{}

// checkListed fails for an entry of an expected-failure list that names
// nothing the run checked (a renamed line or job would leave it behind).
func checkListed(t *testing.T, list map[string]string, checked []string, what string) {
	for name := range list {
		if !slices.Contains(checked, name) {
			t.Errorf("%s names %q, which this run did not check", what, name)
		}
	}
}
