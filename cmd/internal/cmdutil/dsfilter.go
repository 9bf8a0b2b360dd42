package cmdutil

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// FilterResources applies DeepSpeed's --include/--exclude (runner.py
// parse_resource_filter): NODE_SPEC[@NODE_SPEC ...] with NODE_SPEC =
// NAME[:SLOT[,SLOT ...]]. include keeps only the named hosts (all their
// slots, or the listed ones); exclude drops the listed slots, or whole
// hosts. Hosts keep the hostfile's order; a host left without slots is
// dropped. It returns the hosts and each one's slots (GPU indices).
func FilterResources(hosts []remote.HostSpec, include, exclude string) ([]remote.HostSpec, [][]int, error) {
	if include != "" && exclude != "" {
		return nil, nil, InputErrorf("--include and --exclude cannot be combined (DeepSpeed: mutually exclusive)")
	}
	flag, spec := "--include", include
	if exclude != "" {
		flag, spec = "--exclude", exclude
	}
	index := map[string]int{}
	all := make([][]int, len(hosts))
	for i, h := range hosts {
		index[h.Name] = i
		index[h.HostTarget.String()] = i
		for s := range h.Slots {
			all[i] = append(all[i], s)
		}
	}
	chosen := make([][]int, len(hosts))
	if exclude != "" {
		for i := range all {
			chosen[i] = slices.Clone(all[i])
		}
	}
	for _, node := range strings.Split(spec, "@") {
		name, slotList, hasSlots := strings.Cut(node, ":")
		i, ok := index[name]
		if !ok && bareSlots.MatchString(name) {
			// DeepSpeed's parse_resource_filter fails the same way
			// ("Hostname '0,1' not found in hostfile"): slots follow a colon.
			return nil, nil, InputErrorf("%s %s: %q is not a host; hosts are separated by '@' and a host's slots follow a colon, as in DeepSpeed: NAME[:SLOT[,SLOT...]][@NAME...], e.g. %s:%s", flag, spec, name, strings.TrimSuffix(strings.Split(spec, "@")[0], ":"), name)
		}
		if !ok {
			return nil, nil, InputErrorf("%s %s: host %q is not in the host list", flag, spec, name)
		}
		if !hasSlots {
			if include != "" {
				chosen[i] = slices.Clone(all[i])
			} else {
				chosen[i] = nil
			}
			continue
		}
		for _, f := range strings.Split(slotList, ",") {
			slot, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || !slices.Contains(all[i], slot) {
				return nil, nil, InputErrorf("%s %s: no slot %q on host %s (it has %d)", flag, spec, f, name, hosts[i].Slots)
			}
			if include != "" {
				if !slices.Contains(chosen[i], slot) {
					chosen[i] = append(chosen[i], slot)
				}
			} else {
				chosen[i] = slices.DeleteFunc(chosen[i], func(s int) bool { return s == slot })
			}
		}
	}
	var outHosts []remote.HostSpec
	var outSlots [][]int
	for i, h := range hosts {
		if len(chosen[i]) == 0 {
			continue
		}
		h.Slots = len(chosen[i])
		outHosts = append(outHosts, h)
		outSlots = append(outSlots, chosen[i])
	}
	if len(outHosts) == 0 {
		return nil, nil, InputErrorf("%s %s leaves no host", flag, spec)
	}
	return outHosts, outSlots, nil
}

// bareSlots matches a bare slot list ("0,1"), given where a host belongs.
var bareSlots = regexp.MustCompile(`^[0-9]+(,[0-9]+)*$`)

// DeviceList is a host's slots as CUDA_VISIBLE_DEVICES, as DeepSpeed's
// launch.py sets it.
func DeviceList(slots []int) string {
	s := make([]string, len(slots))
	for i, v := range slots {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}
