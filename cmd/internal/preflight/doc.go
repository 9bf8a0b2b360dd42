// Package preflight is `pipette-launch preflight`: run's flags and
// rendered per-rank environment, but the collective test of every group
// (all-reduce per TP/CP/DP group, send/recv per pipeline link) instead of
// the script. The test itself is run's (run --preflight gates a job on it).
package preflight
