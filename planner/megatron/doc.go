// Package megatron reads a Megatron-LM argument list into a model shape and
// the parallelism it pins (the one parser of Megatron arguments in the
// project), and checks a config against the rules Megatron-LM's own
// validate_args enforces.
package megatron
