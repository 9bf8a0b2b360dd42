package launchprobe

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/shellquote"
	"github.com/pipette-launch/pipette-launch/launcher/probe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// Result is what the quick pre-launch probe found: the address rank
// 0's host is reached on (MASTER_ADDR) and, per host, the interface whose
// address routes there (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME) and
// whether the launching machine's interpreter exists there. Without it,
// gloo binds to whatever the host's own name resolves to: nothing, or
// 127.0.1.1 in many containers and cloud images, and every rank then dies
// with "connect [127.0.0.1]: Connection refused".
type Result struct {
	// MasterAddr is rank 0's host's IPv4 address as the job reaches it.
	MasterAddr string `json:"master_addr"`
	// Hosts follow the targets' order.
	Hosts []HostRoute `json:"hosts"`
	// ProbedAt is when the probe ran.
	ProbedAt time.Time `json:"probed_at"`
}

// HostRoute is one host's answer.
type HostRoute struct {
	Target   string `json:"target"` // HostTarget.String()
	Hostname string `json:"hostname"`
	// Ifname is the interface that reaches MasterAddr ("" when unknown:
	// no `ip` on the host); Src its address.
	Ifname string `json:"ifname,omitempty"`
	Src    string `json:"src,omitempty"`
	// Python is the interpreter path checked; PythonFound whether it is an
	// executable file there.
	Python      string `json:"python,omitempty"`
	PythonFound bool   `json:"python_found,omitempty"`
	// Problem says why Ifname is empty.
	Problem string `json:"problem,omitempty"`
	// Links are the host's RDMA ports and network interfaces with their
	// state from sysfs (the health check: Health); GPUs how many GPUs
	// nvidia-smi -L lists (nil: no nvidia-smi there).
	Links []probe.NIC `json:"links,omitempty"`
	GPUs  *int        `json:"gpus,omitempty"`
}

// sections are the launch probe's own sections of its probe script
// (probe.Script, which adds the sysfs dump of the links), run under sh with
// $1 = rank 0's address (empty on rank 0's own host, which finds it from
// its SSH connection) and $2 = an interpreter path to check (may be empty).
const sections = `sec hostname; hostname 2>/dev/null || cat /proc/sys/kernel/hostname
sec ssh_connection; printf '%s\n' "$SSH_CONNECTION"
if command -v ip >/dev/null 2>&1; then
  sec ipaddr; ip -o -4 addr show 2>&1
  [ -n "$1" ] && { sec route; ip -o -4 route get "$1" 2>&1; }
else
  sec noip
fi
if [ -n "$2" ]; then sec python; if [ -f "$2" ] && [ -x "$2" ]; then echo yes; else echo no; fi; fi
if command -v nvidia-smi >/dev/null 2>&1; then sec gpulist; nvidia-smi -L 2>&1; sec gpulist_rc "$?"; fi
`

// command is the launch probe's one remote command line.
func command(masterAddr, python string) string {
	return "sh -c " + shellquote.Join([]string{probe.Script(sections), "sh", masterAddr, python})
}

// Hosts runs the launch probe over SSH: rank 0's host (targets[rank0])
// reports the address it is reached on, every other host the interface
// that routes there, each in one command over the pool's connection (the
// launch reuses it), in a session that then stands by in the pool for the
// job's agent (Pool.RunStandingBy). All hosts probe at once when the
// connection to rank 0's host shows that address (Conn.ReachedIPv4);
// else, or when rank 0 reports another, the others probe after it. python, when not empty, is
// an interpreter path whose presence every host reports.
func Hosts(ctx context.Context, pool *remote.Pool, targets []remote.HostTarget, rank0 int, python string) (*Result, error) {
	if rank0 < 0 || rank0 >= len(targets) {
		return nil, fmt.Errorf("launch probe: rank 0's host index %d out of range", rank0)
	}
	if err := pool.DialAll(ctx, targets); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	lp := &Result{Hosts: make([]HostRoute, len(targets)), ProbedAt: time.Now().UTC()}
	index := map[string]int{}
	var others []remote.HostTarget
	for i, t := range targets {
		if i != rank0 {
			index[t.String()] = i
			others = append(others, t)
		}
	}
	// Each run writes its own slot of lp.Hosts; index is only read.
	run := func(ctx context.Context, i int, addr string) error {
		stdout, stderr, err := pool.RunStandingBy(ctx, targets[i], command(addr, python))
		if err != nil {
			return fmt.Errorf("launch probe: %w%s", err, remote.StderrSuffix(stderr))
		}
		hr, master, err := ParseOutput(string(stdout), addr)
		if err != nil {
			return fmt.Errorf("launch probe: %w", err)
		}
		hr.Target, hr.Python = targets[i].String(), python
		lp.Hosts[i] = hr
		if addr == "" {
			lp.MasterAddr = master
		}
		return nil
	}
	guess, first := "", targets[rank0:rank0+1]
	if c := pool.Conn(targets[rank0]); c != nil {
		guess = c.ReachedIPv4()
	}
	if guess != "" {
		first = targets
	}
	if err := pool.Each(ctx, first, func(ctx context.Context, t remote.HostTarget) error {
		if i, ok := index[t.String()]; ok {
			return run(ctx, i, guess)
		}
		return run(ctx, rank0, "")
	}); err != nil {
		return nil, err
	}
	if lp.MasterAddr == "" {
		return nil, fmt.Errorf("launch probe: %s: no IPv4 address other hosts could reach rank 0 on", targets[rank0])
	}
	if lp.MasterAddr == guess {
		return lp, nil
	}
	if err := pool.Each(ctx, others, func(ctx context.Context, t remote.HostTarget) error {
		return run(ctx, index[t.String()], lp.MasterAddr)
	}); err != nil {
		return nil, err
	}
	return lp, nil
}

// ParseOutput reads one host's launch-probe output. masterAddr is the
// address the host was asked to route to; empty on rank 0's host, whose
// own reach address (the SSH connection's, else its first global IPv4) is
// returned as master.
func ParseOutput(out, masterAddr string) (hr HostRoute, master string, err error) {
	po, err := probe.SplitOutput(out)
	if err != nil {
		return hr, "", err
	}
	hr.Hostname = strings.TrimSpace(po.Sections["hostname"])
	hr.PythonFound = strings.TrimSpace(po.Sections["python"]) == "yes"
	hr.Links, hr.GPUs = po.Links(), visibleGPUs(po)
	if _, ok := po.Sections["noip"]; ok {
		hr.Problem = "`ip` (iproute2) is not installed"
		if masterAddr == "" {
			master = sshServerAddr(po.Sections["ssh_connection"])
		}
		return hr, master, nil
	}
	addrs, err := probe.ParseIPAddr(po.Sections["ipaddr"])
	if err != nil {
		return hr, "", err
	}
	if masterAddr == "" {
		master, hr.Ifname = probe.ReachAddress(po.Sections["ssh_connection"], addrs)
		hr.Src = master
		if hr.Ifname == "" {
			hr.Problem = "no interface holds the address " + master
		}
		return hr, master, nil
	}
	// A host that holds the address itself (two targets on one machine)
	// reaches it over loopback; its ranks must still bind the interface
	// the other hosts reach.
	for _, a := range addrs {
		if a.Addr.String() == masterAddr {
			hr.Ifname, hr.Src = a.Iface, masterAddr
			return hr, "", nil
		}
	}
	hr.Ifname, hr.Src, err = parseRouteGet(po.Sections["route"])
	if err != nil {
		hr.Problem = err.Error()
		hr.Ifname, hr.Src = "", ""
	}
	return hr, "", nil
}

// sshServerAddr is SSH_CONNECTION's server address when it is not loopback.
func sshServerAddr(sshConnection string) string {
	if f := strings.Fields(sshConnection); len(f) >= 3 {
		if ip := net.ParseIP(f[2]); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
			return ip.String()
		}
	}
	return ""
}

// parseRouteGet reads `ip -o -4 route get ADDR`:
// "198.18.0.11 dev eth0 src 198.18.0.12 uid 0 \    cache".
func parseRouteGet(out string) (dev, src string, err error) {
	f := strings.Fields(out)
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "dev":
			if dev == "" {
				dev = f[i+1]
			}
		case "src":
			if src == "" {
				src = f[i+1]
			}
		}
	}
	if dev == "" {
		return "", "", fmt.Errorf("no route to rank 0's host: ip route get says %q", strings.TrimSpace(out))
	}
	return dev, src, nil
}

// Local is the launch probe of a job run on this machine: its
// ranks meet on loopback (torchrun's --standalone), so nothing leaves the
// machine and nothing depends on what its host name resolves to.
func Local(python string) *Result {
	hr := HostRoute{Target: remote.LocalHostName, Ifname: "lo", Src: "127.0.0.1", Python: python}
	if python != "" {
		st, err := os.Stat(python)
		hr.PythonFound = err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
	}
	if h, err := os.Hostname(); err == nil {
		hr.Hostname = h
	}
	return &Result{MasterAddr: "127.0.0.1", Hosts: []HostRoute{hr}}
}

// visibleGPUs counts the GPUs nvidia-smi -L listed; 0 when it failed (no
// driver loaded), nil when it is not installed.
func visibleGPUs(po *probe.Output) *int {
	if _, ran := po.Sections["gpulist"]; !ran {
		return nil
	}
	n := 0
	if strings.TrimSpace(po.Sections["gpulist_rc"]) == "0" {
		l, _ := probe.ParseGPUList(po.Sections["gpulist"])
		n = len(l)
	}
	return &n
}

// Health is the host's health check before a (re)start: the links named
// (the interface the job's traffic takes, the RDMA ports and interfaces
// the cluster file names) that the probe found must be up, and gpus (the
// GPUs the host is to run on; 0: none checked) must be visible when
// nvidia-smi is there. A link the probe did not find is not judged (a
// container may show other interfaces than the job uses). nil: healthy.
func (hr HostRoute) Health(links []string, gpus int) error {
	var problems []string
	seen := map[string]bool{}
	for _, name := range links {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		for _, l := range hr.Links {
			if l.Name == name && !l.Active {
				problems = append(problems, fmt.Sprintf("link %s is down (state %s, from sysfs)", name, cmp.Or(l.State, "unknown")))
			}
		}
	}
	if gpus > 0 && hr.GPUs != nil && *hr.GPUs < gpus {
		problems = append(problems, fmt.Sprintf("%d of its %d GPUs visible (nvidia-smi -L)", *hr.GPUs, gpus))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("health check: %s", strings.Join(problems, "; "))
}
