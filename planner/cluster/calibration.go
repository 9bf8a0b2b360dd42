package cluster

import (
	"github.com/pipette-launch/pipette-launch/planner/cluster/calib"
	"github.com/pipette-launch/pipette-launch/planner/fabric"
	"github.com/pipette-launch/pipette-launch/planner/gpu"
)

// FactorKeys lists the factors a cluster can be calibrated with: compute,
// the intra-host bus of islands with more than one GPU per host, links
// inside islands of several hosts and between every two islands.
func (f *File) FactorKeys() []string {
	keys := []string{calib.ComputeFactorKey}
	for _, c := range f.Clusters {
		if c.GPUsPerHost > 1 {
			keys = append(keys, calib.IntraHostKey(c.Name))
		}
	}
	for i, a := range f.Clusters {
		if len(a.Hosts) > 1 {
			keys = append(keys, calib.InterHostKey(a.Name, a.Name))
		}
		for _, b := range f.Clusters[i+1:] {
			keys = append(keys, calib.InterHostKey(a.Name, b.Name))
		}
	}
	return keys
}

// applyCalibration scales compute and links by the fitted factors.
func (f *File) applyCalibration(islands []Island, hosts []Host, links *compactLinks) {
	c := f.Calibration
	if c == nil {
		return
	}
	for i := range hosts {
		ScaleHost(c, &hosts[i], islands[hosts[i].Island].Spec.Name)
	}
	// Links between hosts of two islands (or within one) share a factor:
	// scale each island pair's nominal link and measured rates.
	ni := links.islands
	links.measuredDiv = make([]float64, ni*ni)
	for a := range islands {
		for b := range islands {
			k := c.Factor(calib.InterHostKey(islands[a].Spec.Name, islands[b].Spec.Name))
			links.nominal[a*ni+b].BytesPerS /= k
			links.nominal[a*ni+b].LatencyS *= k
			links.measuredDiv[a*ni+b] = k
		}
	}
}

// ScaleHost applies c's compute and intra-host factors to one host of
// the named island: its GPU's tensor-core rates and HBM bandwidth are divided by
// the compute factor, its bus by the island's intra-host factor.
func ScaleHost(c *calib.Calibration, h *Host, island string) {
	cf := c.Factor(calib.ComputeFactorKey)
	scaleCompute(&h.GPU, 1/cf)
	h.GPU.MemoryBandwidthTBPerS = gpu.HBMBytesPerS(h.GPU) / 1e12 / cf
	h.IntraBytesPerS /= c.Factor(calib.IntraHostKey(island))
}

// Linearize splits a prediction by the factors of f's calibration:
// predict prices the run on a cluster resolved from a copy of f with one
// factor changed by 1%. It returns the run with PredictedS (f's own
// factors), PartsS (dT/dx_k x x_k: the seconds factor k scales; zero parts
// left out), Factors (x_k in force) and FixedS (what no factor scales).
func Linearize(f *File, t fabric.Transport, predict func(*Cluster) (float64, error)) (calib.Run, error) {
	eval := func(cal *calib.Calibration) (float64, error) {
		g := *f
		g.Calibration = cal
		c, err := g.ResolveFor(t)
		if err != nil {
			return 0, err
		}
		return predict(c)
	}
	return calib.Linearize(f.Calibration, f.FactorKeys(), eval)
}
