// Package memory estimates what one rank holds: model states (weights,
// gradients, optimizer states, sharded by the distributed optimizer or ZeRO),
// activations under 1F1B or interleaving and recomputation, MoE expert
// states and buffers, and the host memory and PCIe traffic of CPU offload.
package memory
