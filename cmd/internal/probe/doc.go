// Package probe is `pipette-launch probe`: reach the hosts (SSH pool or
// srun steps), read their GPUs, NICs and memory, optionally measure links
// and compute, and write the cluster file. Run takes Options and is what
// tests call.
package probe
