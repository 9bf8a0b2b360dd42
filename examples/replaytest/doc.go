// Package replaytest runs examples/replay_plan.py as a real torch.distributed
// (gloo, CPU) job on loopback and checks its process groups, its schedule's
// timing floor and that the bytes it is told to move cost time. It holds
// tests only: the script itself is Python, started the way torchrun starts it.
package replaytest
