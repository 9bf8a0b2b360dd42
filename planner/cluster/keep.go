package cluster

// Keep is the resolved cluster narrowed to the hosts listed (indices into
// c.Hosts, in the order given): the planner's way of pricing a plan that
// leaves some hosts idle. Every kept pair of hosts keeps its link, measured
// or nominal, and each host its island; islands left without hosts stay,
// empty, so that island indices and the links between islands keep their
// meaning. File.Subset narrows a cluster file by name before it is
// resolved; Keep narrows what is already resolved, without reading the
// file again.
func (c *Cluster) Keep(hosts []int) *Cluster {
	out := &Cluster{Hosts: make([]Host, len(hosts)), fastest: &lazyLink{}, classes: &lazyClasses{}}
	out.Islands = make([]Island, len(c.Islands))
	for i, is := range c.Islands {
		out.Islands[i] = Island{Spec: is.Spec, RDMA: is.RDMA}
	}
	for k, h := range hosts {
		out.Hosts[k] = c.Hosts[h]
		isl := c.Hosts[h].Island
		out.Islands[isl].Hosts = append(out.Islands[isl].Hosts, k)
	}
	if c.intraLat != nil {
		out.intraLat = make([]float64, len(hosts))
		for k, h := range hosts {
			out.intraLat[k] = c.intraLat[h]
		}
	}
	if c.bw != nil {
		out.bw, out.lat = make([][]float64, len(hosts)), make([][]float64, len(hosts))
		for k, a := range hosts {
			out.bw[k], out.lat[k] = make([]float64, len(hosts)), make([]float64, len(hosts))
			for j, b := range hosts {
				out.bw[k][j], out.lat[k][j] = c.bw[a][b], c.lat[a][b]
			}
		}
	}
	out.compact = c.compact.keep(hosts)
	out.pipe = c.pipe.keep(hosts)
	return out
}

// keep re-indexes the per-host tables by the kept hosts; the island and
// measured tables are shared, read-only, with the whole cluster's.
func (l *compactLinks) keep(hosts []int) *compactLinks {
	if l == nil {
		return nil
	}
	out := *l
	out.island = make([]int32, len(hosts))
	for k, h := range hosts {
		out.island[k] = l.island[h]
	}
	if l.mrow != nil {
		out.mrow = make([]int32, len(hosts))
		for k, h := range hosts {
			out.mrow[k] = l.mrow[h]
		}
	}
	return &out
}
