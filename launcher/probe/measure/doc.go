// Package measure measures what probing cannot read: the bandwidth of every
// host pair with iperf3 in rounds of disjoint pairs (Measure, cached on
// disk), each host's GEMM rate and all-reduce bus bandwidth with torch
// (MeasureCompute), and a finished run's iteration time from its logs
// (ParseIterationLog, for calibrate). Results are the planner's measured
// types, which a cluster file carries.
package measure
