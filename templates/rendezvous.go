package templates

import (
	"cmp"
	"fmt"
	"net"
	"strings"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// Rendezvous is what the launch probe found about where the ranks meet.
type Rendezvous struct {
	// Addr is rank 0's host's address as the other hosts reach it.
	Addr string
	// Ifnames[i] is the interface of cluster host i whose address routes
	// to Addr ("" when unknown).
	Ifnames []string
}

// masterAddress is MASTER_ADDR: always rank 0's host. The user's own
// --master-addr (or --rdzv-endpoint host) is kept when it names that host;
// one naming another host, a host outside the job, or loopback on a
// multi-host job is replaced with one warning, since ranks would wait for
// a store nobody serves. With --node-rank pinned, a master that is another
// host of the job contradicts the user's own order: an error.
func masterAddress(c *cluster.Cluster, p *search.Plan, o Options) (string, []string, error) {
	hi := p.Placement[rank0(p)].HostIndex
	h := c.Hosts[hi]
	ours := cmp.Or(h.Address, h.Name)
	if o.Rendezvous != nil && o.Rendezvous.Addr != "" {
		ours = o.Rendezvous.Addr
	}
	user := strings.TrimSpace(o.MasterAddr)
	if user == "" {
		return ours, nil, nil
	}
	multiHost := len(ranksByHost(p)) > 1
	if isLoopback(user) {
		if !multiHost {
			return user, nil, nil
		}
		return ours, []string{fmt.Sprintf("master address %s is loopback, but the job spans hosts: MASTER_ADDR=%s (rank 0's host %s), port %d kept", user, ours, h.Name, o.MasterPort)}, nil
	}
	if namesHost(user, h, o.Rendezvous) {
		if o.Rendezvous != nil && o.Rendezvous.Addr != "" {
			// The probed address needs no name resolution on the hosts.
			return ours, nil, nil
		}
		return user, nil, nil
	}
	for _, r := range p.Placement {
		other := c.Hosts[r.HostIndex]
		if r.HostIndex == hi || !namesHost(user, other, nil) {
			continue
		}
		if o.NodeRankPinned {
			return "", nil, fmt.Errorf("master address %s is host %s, but rank 0 (node rank 0) runs on %s: with --node-rank given, the host order you pinned contradicts the master address; drop --node-rank/--master-addr (pipette-launch sets both) or list %s first", user, other.Name, h.Name, other.Name)
		}
		return ours, []string{fmt.Sprintf("master address %s is host %s, but rank 0 runs on %s: MASTER_ADDR=%s, port %d kept", user, other.Name, h.Name, ours, o.MasterPort)}, nil
	}
	return ours, []string{fmt.Sprintf("master address %s is not a host of this job: MASTER_ADDR=%s (rank 0's host %s), port %d kept", user, ours, h.Name, o.MasterPort)}, nil
}

func isLoopback(addr string) bool {
	if strings.EqualFold(addr, "localhost") || strings.HasSuffix(strings.ToLower(addr), ".localhost") {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

func namesHost(addr string, h cluster.Host, rv *Rendezvous) bool {
	if strings.EqualFold(addr, h.Name) || strings.EqualFold(addr, h.Address) {
		return true
	}
	return rv != nil && rv.Addr != "" && addr == rv.Addr
}

// withRendezvousIfname sets the host's gloo and NCCL socket interface to
// the one that routes to rank 0: gloo binds there (not wherever the host's
// own name resolves), and NCCL's bootstrap and sockets use that exact name.
func withRendezvousIfname(env []job.EnvVar, rv *Rendezvous, hostIdx int) []job.EnvVar {
	if rv == nil || hostIdx >= len(rv.Ifnames) || rv.Ifnames[hostIdx] == "" {
		return env
	}
	name := rv.Ifnames[hostIdx]
	out := env[:0:0]
	for _, e := range env {
		if e.Name != "GLOO_SOCKET_IFNAME" && e.Name != "NCCL_SOCKET_IFNAME" {
			out = append(out, e)
		}
	}
	return append(out, job.EnvVar{Name: "GLOO_SOCKET_IFNAME", Value: name}, job.EnvVar{Name: "NCCL_SOCKET_IFNAME", Value: "=" + name})
}
