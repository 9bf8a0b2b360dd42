// Package schedule simulates pipeline schedules (1F1B, interleaved 1F1B,
// and the wave-like what-if schedule) as events over uneven stages and
// links, giving the iteration span, per-rank busy time and the event list;
// and splits layers over stages so that the slowest stage is fastest.
package schedule
