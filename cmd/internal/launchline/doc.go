// Package launchline is the launch-line reader: a torchrun, DeepSpeed
// launcher or `python -m torch.distributed.launch` line's launcher flags
// (their dashed and underscored spellings, PET_* defaults, the flags that
// are accepted and ignored) read into a Line, the launcher the line was
// written for, and the hosts that launcher would use when the line names
// none. It knows nothing of plans or launches: `run` turns a Line into a
// plan and a job.
package launchline
