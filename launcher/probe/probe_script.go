package probe

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
)

// probeMarker starts every section line of the probe script's output.
const probeMarker = "::pipette-probe::"

// Script is a probe script, one POSIX sh run: it defines sec NAME [ARG],
// which starts a section ("::pipette-probe:: NAME [ARG]" and then the
// section's text), and val (valFunc); runs body, whose sections are its
// own; then dumps the sysfs files of every RDMA port and network interface
// below $R (nicsDumpSnippet: unset, /) and prints the end marker.
// SplitOutput reads what it prints. The full probe's script (probeSections)
// is one, the launch probe's (launcher/probe/launchprobe) another, so both
// read links from one dump with one set of readers.
func Script(body string) string {
	return `m='` + probeMarker + `'
sec() { printf '%s %s\n' "$m" "$*"; }
` + valFunc + body + nicsDumpSnippet + "sec end\n"
}

// probeSections are what the full probe reads besides the links. Files are
// read with the `read` builtin (no fork per sysfs file) and only their
// first line is kept, which is all a sysfs attribute holds. Missing
// nvidia-smi or /sys/class/infiniband simply leave their sections out.
const probeSections = `sec hostname; hostname 2>/dev/null || cat /proc/sys/kernel/hostname
sec ssh_connection; printf '%s\n' "$SSH_CONNECTION"
sec nproc; nproc 2>/dev/null
sec cpuinfo; grep '^processor' /proc/cpuinfo 2>/dev/null
sec meminfo; grep '^MemTotal:' /proc/meminfo
sec ipaddr; ip -o -4 addr show 2>/dev/null
if command -v python3 >/dev/null 2>&1; then
  sec software; python3 -c '` + softwareSnippet + `' 2>/dev/null
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  sec gpus; nvidia-smi --query-gpu=` + GPUQueryFields + ` --format=csv,noheader,nounits 2>&1; rc=$?; sec gpus_rc "$rc"
  if [ "$rc" != 0 ]; then sec gpulist; nvidia-smi -L 2>&1; sec gpulist_rc "$?"; fi
  sec topo; nvidia-smi topo -m 2>/dev/null
fi
`

// softwareSnippet prints "torch V", "nccl V" and "megatron_core V" from
// installed package metadata, without importing torch (seconds on a busy
// host): NCCL as the nvidia-nccl wheel torch's pip builds depend on. An
// empty V is unknown (a conda build, a Megatron checkout on PYTHONPATH).
const softwareSnippet = `import importlib.metadata as m
for k, names in (("torch", ("torch",)), ("nccl", ("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13")), ("megatron_core", ("megatron-core", "megatron_core"))):
    v = ""
    for n in names:
        try:
            v = m.version(n)
            break
        except Exception:
            pass
    print(k, v)`

// ProbeCommand is the one remote command line that probes a host. It runs
// the script under sh so the login shell's flavour does not matter.
func ProbeCommand() string { return probeCommandAt("") }

// valFunc defines val FILE: a sysfs file's first line as a "file" section
// (read with the builtin: no fork per file), nothing when it is absent.
const valFunc = `val() { [ -e "$1" ] || return 0; v=; { read -r v < "$1"; } 2>/dev/null; sec file "${1#"$R"}"; printf '%s\n' "$v"; }
`

// nicsDumpSnippet prints the sysfs files of every RDMA port and network
// interface (below $R, as sec file/dir sections; val must be defined),
// which dumpView reads: the full probe's NICs and the launch probe's
// health check (each link's state) read the same dump.
const nicsDumpSnippet = `for d in "$R"/sys/class/infiniband/*; do
  [ -d "$d" ] || continue
  sec dir "${d#"$R"}/device/net"; ls "$d/device/net" 2>/dev/null
  for p in "$d"/ports/*; do
    [ -d "$p" ] || continue
    for f in link_layer rate state phys_state; do val "$p/$f"; done
    ll=; { read -r ll < "$p/link_layer"; } 2>/dev/null
    [ "$ll" = Ethernet ] || continue
    for t in "$p"/gid_attrs/types/*; do
      v=; { read -r v < "$t"; } 2>/dev/null
      [ -n "$v" ] || continue
      sec file "${t#"$R"}"; printf '%s\n' "$v"; val "$p/gids/${t##*/}"
    done
  done
done
for i in "$R"/sys/class/net/*; do
  [ -e "$i" ] || continue
  for f in type operstate mtu address speed carrier dev_port; do val "$i/$f"; done
  [ -e "$i/device" ] && { sec file "${i#"$R"}/device"; echo present; }
  [ -e "$i/master" ] && { m2=$(readlink "$i/master"); sec file "${i#"$R"}/master"; printf '%s\n' "${m2##*/}"; }
done
`

// probeCommandAt reads sysfs below root instead of / (tests point it at a
// captured sysfs tree); paths in the output are always as seen from /.
func probeCommandAt(root string) string {
	return "sh -c " + shellquote.Quote("R="+shellquote.Quote(root)+"\n"+Script(probeSections))
}

// Output is a probe script's output (Script) split into its sections.
type Output struct {
	// Sections are each section's text by name; a section whose line
	// carries an argument ("sec gpus_rc 0") holds the argument instead.
	// A section the script did not print is absent.
	Sections map[string]string
	// view is the sysfs files the script dumped (Links).
	view dumpView
}

// SplitOutput splits a probe script's output into its sections and sysfs
// dump; output without the end marker (the remote shell stopped early) is
// an error.
func SplitOutput(out string) (*Output, error) {
	po := &Output{
		Sections: map[string]string{},
		view:     dumpView{files: map[string]string{}, dirs: map[string][]string{}},
	}
	var name, arg string
	var body []string
	flush := func() {
		text := strings.Join(body, "\n")
		switch name {
		case "":
		case "file":
			po.view.files[arg] = text
		case "dir":
			var names []string
			for _, l := range body {
				if l = strings.TrimSpace(l); l != "" {
					names = append(names, l)
				}
			}
			po.view.dirs[arg] = names
		default:
			po.Sections[name] = text
			if arg != "" {
				po.Sections[name] = arg
			}
		}
		body = nil
	}
	ended := false
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, probeMarker+" ")
		if !ok {
			body = append(body, line)
			continue
		}
		flush()
		name, arg, _ = strings.Cut(rest, " ")
		if name == "end" {
			ended = true
		}
	}
	flush()
	if !ended {
		return nil, fmt.Errorf("probe output is incomplete (no end marker): the remote shell stopped early")
	}
	return po, nil
}

// Links are every RDMA port and network interface (but loopback) of the
// output's sysfs dump, each with its state and whether it is up, read as
// the full probe reads NICs (RDMAPorts, ethernetNIC: operstate, else
// carrier): the launch probe's health check judges them.
func (o *Output) Links() []NIC {
	links := RDMAPorts(o.view)
	for _, ifc := range o.view.ReadDir(sysNet) {
		if ifc != "lo" {
			links = append(links, ethernetNIC(o.view, ifc))
		}
	}
	return links
}

// IfAddr is one line of `ip -o -4 addr show`.
type IfAddr struct {
	Iface  string
	Addr   net.IP
	Prefix int
	Scope  string
}

// ParseIPAddr parses `ip -o -4 addr show`:
// "2: eth0    inet 198.18.0.11/24 brd 198.18.0.255 scope global eth0\ ...".
func ParseIPAddr(out string) ([]IfAddr, error) {
	var addrs []IfAddr
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "inet" {
			continue
		}
		ip, ipnet, err := net.ParseCIDR(f[3])
		if err != nil {
			return nil, fmt.Errorf("ip -o -4 addr: line %q: %w", line, err)
		}
		ones, _ := ipnet.Mask.Size()
		a := IfAddr{Iface: strings.TrimSuffix(f[1], ":"), Addr: ip, Prefix: ones}
		for i := 4; i+1 < len(f); i++ {
			if f[i] == "scope" {
				a.Scope = f[i+1]
			}
		}
		// "eth0@if12" names a veth's peer index: keep the interface name.
		a.Iface, _, _ = strings.Cut(a.Iface, "@")
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// ReachAddress picks the address other hosts reach this one on: the
// address the SSH connection arrived at (SSH_CONNECTION's third field),
// unless that is loopback; then the first global IPv4 address. It also
// returns the interface holding that address.
func ReachAddress(sshConnection string, addrs []IfAddr) (addr, iface string) {
	if f := strings.Fields(sshConnection); len(f) >= 3 {
		if ip := net.ParseIP(f[2]); ip != nil && !ip.IsLoopback() {
			addr = ip.String()
		}
	}
	for _, a := range addrs {
		if addr != "" && a.Addr.String() == addr {
			return addr, a.Iface
		}
	}
	if addr != "" {
		return addr, ""
	}
	for _, a := range addrs {
		if !a.Addr.IsLoopback() && (a.Scope == "" || a.Scope == "global") {
			return a.Addr.String(), a.Iface
		}
	}
	return "", ""
}

// ParseProbeOutput turns the probe script's output into a HostProbe.
func ParseProbeOutput(out string) (*HostProbe, error) {
	po, err := SplitOutput(out)
	if err != nil {
		return nil, err
	}
	hp := &HostProbe{Hostname: strings.TrimSpace(po.Sections["hostname"]), Software: parseSoftware(po.Sections["software"])}
	if hp.Hostname == "" {
		return nil, fmt.Errorf("probe output: no hostname")
	}
	if hp.MemoryBytes, err = ParseMemTotal(po.Sections["meminfo"]); err != nil {
		return nil, err
	}
	hp.CPUCores, _ = strconv.Atoi(strings.TrimSpace(po.Sections["nproc"]))
	if hp.CPUCores <= 0 {
		hp.CPUCores = ParseCPUInfoCount(po.Sections["cpuinfo"])
	}
	addrs, err := ParseIPAddr(po.Sections["ipaddr"])
	if err != nil {
		return nil, err
	}
	var addrIface string
	hp.Addr, addrIface = ReachAddress(po.Sections["ssh_connection"], addrs)
	if err := hp.parseGPUs(po); err != nil {
		return nil, err
	}
	hp.NICs = DiscoverNICs(po.view, addrIface)
	return hp, nil
}

func (hp *HostProbe) parseGPUs(po *Output) error {
	out, ran := po.Sections["gpus"]
	if !ran {
		return nil // no nvidia-smi: a CPU-only host
	}
	if rc := strings.TrimSpace(po.Sections["gpus_rc"]); rc != "0" {
		if strings.TrimSpace(po.Sections["gpulist_rc"]) == "0" {
			// An nvidia-smi that rejects a query field still lists GPUs:
			// names only, memory then comes from the planner's catalog.
			if l, err := ParseGPUList(po.Sections["gpulist"]); err == nil && len(l) > 0 {
				for _, g := range l {
					hp.GPUs = append(hp.GPUs, GPU{Index: g.Index, Name: g.Name})
				}
				hp.Warnings = append(hp.Warnings, fmt.Sprintf("nvidia-smi --query-gpu failed (exit %s: %s); GPUs from nvidia-smi -L, memory from the catalog", rc, firstLine(out)))
				return nil
			}
		}
		// Installed but failing (no driver loaded): no usable GPUs.
		hp.Warnings = append(hp.Warnings, fmt.Sprintf("nvidia-smi failed (exit %s): %s", rc, firstLine(out)))
		return nil
	}
	gpus, err := ParseGPUQuery(out)
	if err != nil {
		return err
	}
	hp.GPUs = gpus
	if topo := po.Sections["topo"]; strings.TrimSpace(topo) != "" {
		if t, err := ParseTopology(topo); err == nil {
			hp.Topology = t
		} else {
			hp.Warnings = append(hp.Warnings, err.Error())
		}
	}
	return nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}

// parseSoftware reads softwareSnippet's "name version" lines.
func parseSoftware(text string) cluster.SoftwareVersions {
	var sw cluster.SoftwareVersions
	for _, l := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		v = strings.TrimSpace(v)
		switch k {
		case "torch":
			sw.Torch = v
		case "nccl":
			sw.NCCL = v
		case "megatron_core":
			sw.MegatronCore = v
		}
	}
	return sw
}
