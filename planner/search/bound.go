package search

// workBound is a placement-free lower bound on a config's iteration time
// that, unlike the all-fastest bound, knows which GPUs the cluster has:
// every GPU takes a block, so the slow ones must carry layers too.
//
// Pipeline d's period is at least its slowest stage, layers_r * a(r,d) for
// a per-layer time a; for any split of the L layers (the search may
// rebalance it) that is at least L / sum_r 1/a(r,d). The slowest pipeline
// is no faster than the average, and with CP the pace of a stage is its
// slowest CP rank, so
//
//	iteration >= m * L * DP * CP / sum over all blocks u of 1/a(u) + optimizer,
//
// since 1F1B and interleaved schedules need at least m periods.
func (e *planEval) workBound() float64 {
	speed := 0.0
	for h, host := range e.c.Hosts {
		a := e.classes[e.classOf[h]].layerTotal
		if a <= 0 {
			return 0
		}
		speed += float64(host.GPUs/e.cfg.TP) / a
	}
	if speed <= 0 {
		return 0
	}
	m := float64(e.cfg.NumMicroBatches)
	return m*float64(e.m.NumLayers)*float64(e.dp*e.cp)/speed + e.optSec
}
