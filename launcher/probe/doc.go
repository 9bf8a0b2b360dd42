// Package probe finds out what hosts have: GPUs, NICs (InfiniBand, RoCE,
// Ethernet), memory, CPUs and software versions, with one POSIX sh script
// over SSH or srun, parsed here (HostProbe); and it turns probes into a
// cluster file (BuildClusterFile, planner's cluster types). The script's
// frame and its sysfs readers are exported (Script, SplitOutput,
// Output.Links, ReachAddress, UnderSrun) for the launch probe, its
// sub-package launchprobe; measuring links and compute is its sub-package
// measure. It may use the planner's cluster types, never its search or
// cost model, and never the launch.
package probe
