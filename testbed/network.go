package testbed

import (
	"context"
	"fmt"
	"os"
)

// Topology: the bridges live in a private "switch" namespace so that the
// root namespace's firewall (br_netfilter) never sees host-to-host traffic
// and deleting one namespace removes every bridge. Each group of hosts has a
// bridge; group bridges hang off a core bridge through a veth "uplink",
// shaped with tbf on both ends when the spec asks, so only traffic between
// groups is slowed. The root namespace gets one veth (plb<k>) into the core
// bridge with 198.18.k.1/24, which is how pipette-launch reaches the hosts.

func swNetns(k int) string           { return fmt.Sprintf("pl%dsw", k) }
func hostNetns(k, i int) string      { return fmt.Sprintf("pl%dh%d", k, i) }
func rootLink(k int) string          { return fmt.Sprintf("plb%d", k) }
func subnetPrefix(k int) string      { return fmt.Sprintf("198.18.%d.", k) }
func gatewayAddr(k int) string       { return fmt.Sprintf("198.18.%d.1", k) }
func hostAddr(k, i int) string       { return fmt.Sprintf("198.18.%d.%d", k, 10+i) }
func groupBridge(g int) string       { return fmt.Sprintf("br%d", g) }
func uplinkGroupEnd(g int) string    { return fmt.Sprintf("u%da", g) }
func uplinkCoreEnd(g int) string     { return fmt.Sprintf("u%db", g) }
func hostPort(i int) string          { return fmt.Sprintf("p%d", i) }
func hostIfName() string             { return "eth0" }
func tbfBurstBytes(bits int64) int64 { return max(64*1024, bits/8/100) }

// addNetns creates a namespace and records it before anything else can fail.
func (b *builder) addNetns(ctx context.Context, name string) error {
	if err := run(ctx, "ip", "netns", "add", name); err != nil {
		return err
	}
	b.st.Netns = append(b.st.Netns, name)
	return b.st.save()
}

func (b *builder) buildSwitch(ctx context.Context) error {
	k := b.st.Index
	sw := swNetns(k)
	if err := b.addNetns(ctx, sw); err != nil {
		return err
	}
	if err := b.ipIn(ctx, sw, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := b.ipIn(ctx, sw, "link", "add", "core", "type", "bridge"); err != nil {
		return err
	}
	if err := b.ipIn(ctx, sw, "link", "set", "core", "up"); err != nil {
		return err
	}
	root := rootLink(k)
	if err := run(ctx, "ip", "link", "add", root, "type", "veth", "peer", "name", "root", "netns", sw); err != nil {
		return err
	}
	b.st.Links = append(b.st.Links, root)
	if err := b.st.save(); err != nil {
		return err
	}
	// No IPv6 on the root end: keeps the root namespace's only traffic on
	// this link to the test hosts' IPv4 addresses.
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+root+"/disable_ipv6", []byte("1"), 0o644)
	if err := run(ctx, "ip", "addr", "add", gatewayAddr(k)+"/24", "dev", root); err != nil {
		return err
	}
	if err := run(ctx, "ip", "link", "set", root, "up"); err != nil {
		return err
	}
	if err := b.ipIn(ctx, sw, "link", "set", "root", "master", "core", "up"); err != nil {
		return err
	}
	groups := b.spec.groupOrder()
	shape := b.spec.GroupShape != "" && len(groups) > 1
	for g := range groups {
		br := groupBridge(g)
		if err := b.ipIn(ctx, sw, "link", "add", br, "type", "bridge"); err != nil {
			return err
		}
		if err := b.ipIn(ctx, sw, "link", "set", br, "up"); err != nil {
			return err
		}
		ga, gb := uplinkGroupEnd(g), uplinkCoreEnd(g)
		if err := b.ipIn(ctx, sw, "link", "add", ga, "type", "veth", "peer", "name", gb); err != nil {
			return err
		}
		if err := b.ipIn(ctx, sw, "link", "set", ga, "master", br, "up"); err != nil {
			return err
		}
		if err := b.ipIn(ctx, sw, "link", "set", gb, "master", "core", "up"); err != nil {
			return err
		}
		if shape {
			// Both ends: tbf shapes egress only, and each end is the egress
			// of one direction.
			for _, dev := range []string{ga, gb} {
				if err := shapeLink(ctx, sw, dev, b.spec.GroupShape); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (b *builder) buildHostLink(ctx context.Context, i int, h HostSpec) error {
	k := b.st.Index
	sw, ns := swNetns(k), hostNetns(k, i)
	if err := b.addNetns(ctx, ns); err != nil {
		return err
	}
	port := hostPort(i)
	if err := b.ipIn(ctx, sw, "link", "add", port, "type", "veth", "peer", "name", hostIfName(), "netns", ns); err != nil {
		return err
	}
	if err := b.ipIn(ctx, sw, "link", "set", port, "master", groupBridge(b.groupIndex[h.group()]), "up"); err != nil {
		return err
	}
	if err := b.ipIn(ctx, ns, "addr", "add", hostAddr(k, i)+"/24", "dev", hostIfName()); err != nil {
		return err
	}
	if err := b.ipIn(ctx, ns, "link", "set", hostIfName(), "up"); err != nil {
		return err
	}
	if err := b.ipIn(ctx, ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if h.Shape != "" {
		if err := shapeLink(ctx, sw, port, h.Shape); err != nil {
			return err
		}
		if err := shapeLink(ctx, ns, hostIfName(), h.Shape); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) ipIn(ctx context.Context, ns string, args ...string) error {
	return run(ctx, "ip", append([]string{"-n", ns}, args...)...)
}

// shapeLink limits egress of dev in namespace ns with a token bucket, the
// way testbed.md step 5 verified (burst grows with the rate so fast shapes
// are not starved by timer granularity).
func shapeLink(ctx context.Context, ns, dev, rate string) error {
	bits, err := ParseRate(rate)
	if err != nil {
		return err
	}
	return run(ctx, "tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
		"rate", fmt.Sprint(bits)+"bit", "burst", fmt.Sprint(tbfBurstBytes(bits)), "latency", "50ms")
}
