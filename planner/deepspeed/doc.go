// Package deepspeed checks a config against what DeepSpeed's engine
// (Megatron-DeepSpeed) supports.
package deepspeed
