// Package deepspeed is what the planner reads from DeepSpeed: the user's own
// ds_config (--deepspeed_config: batch sizes, ZeRO stage, offload, as
// DeepSpeed derives them; the changes a plan would make to it), and the
// checks of a config against what DeepSpeed's engine (Megatron-DeepSpeed)
// supports. Writing a ds_config for a job is templates'.
package deepspeed
