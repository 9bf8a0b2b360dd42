package cluster

// Subset keeps only the hosts named in keep (in the file's order): islands
// left without hosts are dropped, and with them the links that name them;
// the measured bandwidth matrix keeps the rows and columns of kept hosts
// and measured compute the kept hosts' samples, so that the file still
// validates. Every narrowing of a cluster file (torchrun's --nnodes, the
// hosts --hosts lists) goes through it.
func (f *File) Subset(keep map[string]bool) {
	var islands []IslandSpec
	for _, is := range f.Clusters {
		var hs HostEntries
		for _, h := range is.Hosts {
			if keep[h.Name] {
				hs = append(hs, h)
			}
		}
		if len(hs) == 0 {
			continue
		}
		is.Hosts = hs
		islands = append(islands, is)
	}
	f.Clusters = islands
	f.dropOrphanLinks()
	f.subsetMeasured(keep)
}

// dropOrphanLinks drops the links that name an island the file no longer has.
func (f *File) dropOrphanLinks() {
	islands := map[string]bool{}
	for _, is := range f.Clusters {
		islands[is.Name] = true
	}
	var links []LinkSpec
	for _, l := range f.Links {
		if islands[l.Between[0]] && islands[l.Between[1]] {
			links = append(links, l)
		}
	}
	f.Links = links
}

// subsetMeasured keeps the measured compute samples of kept hosts and the
// measured matrix's rows and columns of kept hosts.
func (f *File) subsetMeasured(kept map[string]bool) {
	if mc := f.MeasuredCompute; mc != nil {
		keep := *mc
		keep.Hosts = nil
		for _, h := range mc.Hosts {
			if kept[h.Host] {
				keep.Hosts = append(keep.Hosts, h)
			}
		}
		f.MeasuredCompute = &keep
	}
	m := f.Measured
	if m == nil {
		return
	}
	var idx []int
	for i, h := range m.Hosts {
		if kept[h] {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		f.Measured = nil
		return
	}
	out := *m
	out.Hosts, out.GbitPerS = nil, nil
	for _, i := range idx {
		out.Hosts = append(out.Hosts, m.Hosts[i])
		row := make([]float64, 0, len(idx))
		for _, j := range idx {
			row = append(row, m.GbitPerS[i][j])
		}
		out.GbitPerS = append(out.GbitPerS, row)
	}
	f.Measured = &out
}
