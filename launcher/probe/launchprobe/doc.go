// Package launchprobe is the quick probe just before a launch: the address
// rank 0's host is reached on and each host's interface towards it
// (Result), over SSH (Hosts), through srun (SlurmHosts) or on this machine
// (Local); each host's links and GPUs for the health check before a
// (re)start (HostRoute.Health); and the answers cached on disk for
// --dry-run and --output-dir (Cache). It runs its own sections in the full
// probe's script and reads the links with the full probe's sysfs readers
// (launcher/probe: Script, SplitOutput, Output.Links), so one reader serves
// both. Like the probe, it never imports the planner's search or the launch.
package launchprobe
