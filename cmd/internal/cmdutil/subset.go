package cmdutil

import "github.com/pipette-launch/pipette-launch/planner/cluster"

// DropOrphanLinks drops the links that name an island the file no longer has.
func DropOrphanLinks(f *cluster.File) {
	islands := map[string]bool{}
	for _, is := range f.Clusters {
		islands[is.Name] = true
	}
	var links []cluster.LinkSpec
	for _, l := range f.Links {
		if islands[l.Between[0]] && islands[l.Between[1]] {
			links = append(links, l)
		}
	}
	f.Links = links
}
