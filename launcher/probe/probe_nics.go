package probe

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// NIC is one network port as the probe found it. RDMA ports are named
// dev:port (mlx5_0:1); Ethernet NICs by their interface name.
type NIC struct {
	Type cluster.NICType `json:"type"`
	Name string          `json:"name"`
	// Netdev is the interface carrying the port's IP traffic (IPoIB for IB,
	// the Ethernet interface for RoCE); empty when sysfs names none.
	Netdev       string  `json:"netdev,omitempty"`
	RateGbitPerS float64 `json:"rate_gbit_per_s"`
	// State is the port state (ACTIVE, DOWN ...) or the interface operstate.
	State     string `json:"state"`
	PhysState string `json:"phys_state,omitempty"`
	Active    bool   `json:"active"`
	// GIDIndex is the RoCE GID index to use (RoCE only, when found).
	GIDIndex *int `json:"gid_index,omitempty"`
	MTU      int  `json:"mtu,omitempty"`
}

// sysView reads a /sys tree: the real one under a root directory (fixtures)
// or the dump the probe script sends back.
type sysView interface {
	// ReadFile returns a file's first line; ok is false when it is absent.
	ReadFile(path string) (string, bool)
	// ReadDir lists a directory's entry names, sorted.
	ReadDir(path string) []string
	Exists(path string) bool
}

// dirView is a sysfs tree on the local file system below Root.
type dirView struct{ Root string }

// ReadFile returns a file's first line; for a link to a directory (sysfs'
// master, device) it returns the name the link points to, as the probe
// script prints it.
func (d dirView) ReadFile(p string) (string, bool) {
	full := filepath.Join(d.Root, p)
	if st, err := os.Stat(full); err == nil && st.IsDir() {
		target, err := os.Readlink(full)
		if err != nil {
			return "", false
		}
		return filepath.Base(target), true
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), true
}

func (d dirView) ReadDir(p string) []string {
	ents, err := os.ReadDir(filepath.Join(d.Root, p))
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func (d dirView) Exists(p string) bool {
	_, err := os.Stat(filepath.Join(d.Root, p))
	return err == nil
}

// dumpView is the sysfs subset the probe script printed: file contents by
// path, plus explicit directory listings for symlinked dirs (device/net).
type dumpView struct {
	files map[string]string
	dirs  map[string][]string
}

func (d dumpView) ReadFile(p string) (string, bool) {
	v, ok := d.files[p]
	return strings.TrimSpace(v), ok
}

func (d dumpView) ReadDir(p string) []string {
	if l, ok := d.dirs[p]; ok {
		return l
	}
	seen := map[string]bool{}
	prefix := strings.TrimSuffix(p, "/") + "/"
	for f := range d.files {
		if rest, ok := strings.CutPrefix(f, prefix); ok {
			name, _, _ := strings.Cut(rest, "/")
			seen[name] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (d dumpView) Exists(p string) bool {
	if _, ok := d.files[p]; ok {
		return true
	}
	if _, ok := d.dirs[p]; ok {
		return true
	}
	return len(d.ReadDir(p)) > 0
}

const (
	sysIB  = "/sys/class/infiniband"
	sysNet = "/sys/class/net"
)

// RDMAPorts lists every port under /sys/class/infiniband: link_layer
// InfiniBand is an InfiniBand NIC, Ethernet a RoCE NIC.
func RDMAPorts(v sysView) []NIC {
	var nics []NIC
	for _, dev := range v.ReadDir(sysIB) {
		netdevs := v.ReadDir(sysIB + "/" + dev + "/device/net")
		for _, port := range v.ReadDir(sysIB + "/" + dev + "/ports") {
			nics = append(nics, rdmaPort(v, dev, port, netdevs))
		}
	}
	return nics
}

func rdmaPort(v sysView, dev, port string, netdevs []string) NIC {
	p := sysIB + "/" + dev + "/ports/" + port
	n := NIC{Type: cluster.NICInfiniBand, Name: dev + ":" + port}
	if ll, _ := v.ReadFile(p + "/link_layer"); strings.EqualFold(ll, "Ethernet") {
		n.Type = cluster.NICRoCE
	}
	if r, ok := v.ReadFile(p + "/rate"); ok {
		n.RateGbitPerS, _ = ParseIBRate(r)
	}
	if s, ok := v.ReadFile(p + "/state"); ok {
		st, _ := ParsePortState(s)
		n.State, n.Active = st.String(), st.Active()
	}
	if s, ok := v.ReadFile(p + "/phys_state"); ok {
		if ps, err := ParsePortState(s); err == nil {
			n.PhysState = ps.Text
			if n.PhysState == "" {
				n.PhysState = ibPhysStateNames[ps.Code]
			}
		}
	}
	n.Netdev = portNetdev(v, port, netdevs)
	if n.Type == cluster.NICRoCE {
		if idx, ok := PickRoCEGID(roceGIDs(v, p)); ok {
			n.GIDIndex = &idx
		}
	}
	return n
}

// portNetdev picks the port's interface among the device's netdevs: a
// multi-port device (mlx4) lists one per port, told apart by dev_port
// (0-based port number).
func portNetdev(v sysView, port string, netdevs []string) string {
	if len(netdevs) <= 1 {
		return strings.Join(netdevs, "")
	}
	i, _ := strconv.Atoi(port)
	for _, nd := range netdevs {
		if dp, ok := v.ReadFile(sysNet + "/" + nd + "/dev_port"); ok && dp == strconv.Itoa(i-1) {
			return nd
		}
	}
	if i >= 1 && i <= len(netdevs) {
		return netdevs[i-1]
	}
	return netdevs[0]
}

func roceGIDs(v sysView, port string) []RoCEGID {
	var gids []RoCEGID
	for _, name := range v.ReadDir(port + "/gid_attrs/types") {
		t, ok := v.ReadFile(port + "/gid_attrs/types/" + name)
		idx, err := strconv.Atoi(name)
		if !ok || t == "" || err != nil {
			continue
		}
		gid, _ := v.ReadFile(port + "/gids/" + name)
		if strings.Trim(gid, "0:") == "" {
			continue // an empty table slot
		}
		gids = append(gids, RoCEGID{Index: idx, Type: t, GID: gid})
	}
	return gids
}

// EthernetNICs lists the interfaces under /sys/class/net that count as
// Ethernet NICs. Kept: Ethernet-type interfaces backed by a device (PCI)
// that are not ports of a bond or bridge, and whatever interface holds the
// host's own address (on the test-bed and
// in containers that is a veth without a `device`). Ignored: lo, IPoIB
// (type 32) and RoCE netdevs (they belong to their RDMA NIC), and virtual interfaces
// (bridges, veth, docker0, tunnels) that do not hold the host's address.
func EthernetNICs(v sysView, rdma []NIC, addrNetdev string) []NIC {
	// A RoCE port's netdev is that same Ethernet port: listing it twice
	// would count its bandwidth twice. (An IB port's netdev is IPoIB, type
	// 32, which is skipped anyway.)
	owned := map[string]bool{}
	for _, r := range rdma {
		if r.Type == cluster.NICRoCE && r.Netdev != "" {
			owned[r.Netdev] = true
		}
	}
	var nics []NIC
	slaveRate := map[string]float64{} // master -> fastest enslaved port
	for _, ifc := range v.ReadDir(sysNet) {
		p := sysNet + "/" + ifc
		t, _ := v.ReadFile(p + "/type")
		typ, _ := strconv.Atoi(t)
		if ifc == "lo" || typ != ARPHRDEther || owned[ifc] {
			continue
		}
		if master, ok := v.ReadFile(p + "/master"); ok && master != "" {
			// A bond or bridge port carries traffic as its master: counting
			// both would count the bandwidth twice.
			slaveRate[master] = max(slaveRate[master], ethernetNIC(v, ifc).RateGbitPerS)
			continue
		}
		if !v.Exists(p+"/device") && ifc != addrNetdev {
			continue
		}
		nics = append(nics, ethernetNIC(v, ifc))
	}
	for i := range nics {
		// A bridge reports no speed (a bond reports its ports' sum): take
		// its fastest port's.
		if nics[i].RateGbitPerS == 0 {
			nics[i].RateGbitPerS = slaveRate[nics[i].Name]
		}
	}
	return nics
}

func ethernetNIC(v sysView, ifc string) NIC {
	p := sysNet + "/" + ifc
	n := NIC{Type: cluster.NICEthernet, Name: ifc, Netdev: ifc}
	if s, ok := v.ReadFile(p + "/speed"); ok {
		n.RateGbitPerS, _ = ParseNetSpeed(s)
	}
	n.State, _ = v.ReadFile(p + "/operstate")
	// Virtual interfaces often report "unknown" while passing traffic.
	n.Active = n.State == "up" || (n.State == "unknown" && carrierUp(v, p))
	if m, ok := v.ReadFile(p + "/mtu"); ok {
		n.MTU, _ = strconv.Atoi(m)
	}
	return n
}

func carrierUp(v sysView, p string) bool {
	c, _ := v.ReadFile(p + "/carrier")
	return c == "1"
}

// DiscoverNICs returns the RDMA ports followed by the Ethernet NICs.
func DiscoverNICs(v sysView, addrNetdev string) []NIC {
	rdma := RDMAPorts(v)
	return append(rdma, EthernetNICs(v, rdma, addrNetdev)...)
}
