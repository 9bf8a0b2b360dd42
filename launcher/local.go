package launcher

import (
	"net"
	"os"
	"strings"
)

// LocalHostName is how a local job's host is named in errors from its
// agent.
const LocalHostName = "this machine"

// IsThisMachine reports whether target is the machine we run on, reached
// as ourselves on sshd's default port: its address (after ~/.ssh/config's
// HostName) is loopback, this machine's host name (or its short form), or
// one of this machine's interface addresses. A port of its own (a
// container behind a forwarded port) or another login is another host,
// reached over SSH. Nothing is looked up in DNS.
func IsThisMachine(target HostTarget, opts SSHOptions) bool {
	r, err := resolveTarget(target, opts)
	if err != nil || r.Port != 22 || r.User != currentUser() {
		return false
	}
	addr := strings.ToLower(strings.Trim(r.Addr, "[]"))
	if addr == "localhost" || strings.HasSuffix(addr, ".localhost") {
		return true
	}
	if ip := net.ParseIP(addr); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		addrs, _ := net.InterfaceAddrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	own, err := os.Hostname()
	if err != nil || own == "" {
		return false
	}
	own = strings.ToLower(own)
	short := func(s string) string { h, _, _ := strings.Cut(s, "."); return h }
	// "gpu7" names "gpu7.cluster" and the other way round; two full
	// names must match.
	return addr == own || ((!strings.Contains(addr, ".") || !strings.Contains(own, ".")) && short(addr) == short(own))
}
