// Package search prices and searches training plans: the cost evaluator
// (compute, TP/CP/DP/pipeline/expert communication, optimizer and offload
// time over the real links), the enumeration of configs, rank placement on
// hosts, and the ranked result with its timeline and what-if schedules.
//
// The evaluator, the search and the placement share the evaluator's state
// (planEval: about 80 unexported names between them), so they stay one
// package; splitting them needs an exported evaluator API first.
package search
