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
