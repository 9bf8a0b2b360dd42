// Package crosscluster holds the issue-5 proof: run.sh drives the test-bed,
// pipette-launch and examples/replay_plan.py; replay_sizes.py turns a plan
// into replay arguments and report.py compares the two runs. The Go tests
// check those two helpers on hand-computed cases; run.sh itself is a
// benchmark, run by hand (see README.md).
package crosscluster
