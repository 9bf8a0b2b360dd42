// Package calibrate is `pipette-launch calibrate`: compare a run's
// observed iteration time (Megatron/DeepSpeed logs) with what the planner
// predicted for its plan, and write the correction into the cluster file.
// Run takes Options and is what tests call.
package calibrate
