// Package gpu is what the planner knows about one accelerator: the Spec a
// cluster file names, the built-in catalog that fills its blanks, the GEMM
// precisions, and the fitted compute-efficiency curves that turn FLOPs and
// bytes into seconds.
package gpu
