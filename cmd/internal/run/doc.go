// Package run is `pipette-launch run` (and the bare torchrun-style form):
// read the flags into Options, choose a plan (searched on a cluster file,
// torchrun order on listed hosts), render the job, probe the hosts, then
// print it (--dry-run), write it (--output-dir) or launch and supervise it.
// The steps that reach hosts (Launch, LaunchPreflight, ProbeLaunch) and the
// job id are Options fields, so tests replace them per run. sbatch and
// preflight build on its exported Options, Flags and PlanJob. Choosing the
// plan is planner.Choose; run only gathers its inputs.
package run
