// Package launch runs a rendered job (templates/job) on its hosts: it
// uploads the job's files, starts each host's launch script as an agent
// (over SSH, on this machine without SSH, or as one srun step in a Slurm
// allocation), streams and filters the ranks' output into per-rank logs,
// keeps a heartbeat, stops every rank on every host when one fails, a host
// is lost or on a signal, restarts the job up to --max-restarts, and sums
// up the first failure torchrun-style. It sees only the launch contract:
// never the planner or the rendering.
package launch
