// Package remote reaches hosts; it is what probing and launching share.
// It parses host lists and hostfiles (HostTarget), resolves them through
// ~/.ssh/config, connects over SSH with host keys verified against
// known_hosts (Conn, Session, Upload), keeps one connection per host in a
// Pool with bounded fan-out and per-host errors (HostErrors), runs
// commands through srun instead inside a Slurm allocation (Slurm), and
// tells whether a target is this very machine. It knows nothing of plans,
// probes or jobs.
package remote
