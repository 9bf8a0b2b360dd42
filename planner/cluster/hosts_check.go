package cluster

import (
	"fmt"
	"reflect"

	"gopkg.in/yaml.v3"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/limits"
	"github.com/pipette-launch/pipette-launch/internal/yamlcheck"
)

// hostsCheck checks the hosts fields of a cluster file for
// internal/yamlcheck: it counts the hosts every hosts field names, so that
// a file naming too many is refused before any list is expanded, and
// records where each expanded index came from (see
// HostEntries.UnmarshalYAML for the forms).
func hostsCheck() yamlcheck.Hooks {
	hosts := 0
	return yamlcheck.Hooks{reflect.TypeOf(HostEntries{}): func(w *yamlcheck.Walker, n *yaml.Node, path string) {
		items := []*yaml.Node{n}
		if n.Kind == yaml.SequenceNode {
			items = n.Content
		} else if n.Kind != yaml.ScalarNode {
			w.Bad(n, path, "got %s; want a hostlist expression such as node[01-16] or a list of hosts", yamlcheck.Describe(n))
			return
		}
		idx := 0
		for _, it := range items {
			switch it.Kind {
			case yaml.ScalarNode:
				k, err := hostlist.Count(it.Value)
				if err != nil {
					w.Bad(it, path, "%v", err)
					continue
				}
				hosts += k
				if hosts > limits.MaxHosts {
					w.Bad(it, path, "the file names more than %d hosts (the limit of one job) by here", limits.MaxHosts)
					return
				}
				names, _ := hostlist.Expand(it.Value) // counted above: bounded
				for j, name := range names {
					hp := fmt.Sprintf("%s[%d]", path, idx+j)
					w.SetPos(hp, it)
					if _, err := hostname.ParseTarget(name); err != nil {
						w.Bad(it, hp, "%v", err)
					}
				}
				idx += k
			case yaml.MappingNode:
				hosts++
				w.Walk(it, reflect.TypeOf(HostEntry{}), fmt.Sprintf("%s[%d]", path, idx))
				idx++
			default:
				w.Bad(it, fmt.Sprintf("%s[%d]", path, idx), "got %s; want a host name or a {name, address, user, port} map", yamlcheck.Describe(it))
				idx++
			}
		}
	}}
}
