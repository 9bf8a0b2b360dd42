// Package sbatch is `pipette-launch sbatch`: plan as run would and write a
// Slurm batch script that asks for exactly the job's nodes and runs
// `pipette-launch run --launcher slurm` inside the allocation.
package sbatch
