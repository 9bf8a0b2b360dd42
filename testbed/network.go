package testbed

import (
	"context"
	"fmt"
	"strings"
)

// Topology: the bridges live in a private "switch" namespace so that the
// root namespace's firewall (br_netfilter) never sees host-to-host traffic
// and deleting one namespace removes every bridge. Each group of hosts has a
// bridge; group bridges hang off a core bridge through a veth "uplink",
// shaped with tbf on both ends when the spec asks, so only traffic between
// groups is slowed. The root namespace gets one veth (plb<k>) into the core
// bridge with 198.18.k.1/24, which is how pipette-launch reaches the hosts.
//
// Commands go to ip and tc in batches (one process per namespace): process
// starts dominate Up's time on a loaded machine.

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

// batch runs one `ip`/`tc` process over newline-separated commands; it
// stops at the first failing line and says which.
func batch(ctx context.Context, tool, netns string, lines []string) error {
	if len(lines) == 0 {
		return nil
	}
	args := []string{"-batch", "-"}
	if netns != "" {
		args = append([]string{"-n", netns}, args...)
	}
	return runInput(ctx, strings.Join(lines, "\n")+"\n", tool, args...)
}

// buildNetwork creates every namespace, the root link, the switch and each
// host's link and address.
func (b *builder) buildNetwork(ctx context.Context) error {
	k := b.st.Index
	sw, root := swNetns(k), rootLink(k)
	names := []string{sw}
	for i := range b.spec.Hosts {
		names = append(names, hostNetns(k, i+1))
	}
	var rootCmds []string
	for _, ns := range names {
		rootCmds = append(rootCmds, "netns add "+ns)
	}
	rootCmds = append(rootCmds,
		fmt.Sprintf("link add %s type veth peer name root netns %s", root, sw),
		// no IPv6 link-local address: the root namespace's only traffic on
		// this link goes to the test hosts' IPv4 addresses
		fmt.Sprintf("link set %s addrgenmode none", root),
		fmt.Sprintf("addr add %s/24 dev %s", gatewayAddr(k), root),
		fmt.Sprintf("link set %s up", root))
	err := batch(ctx, "ip", "", rootCmds)
	// Record even on error: teardown skips what does not exist.
	b.st.Netns, b.st.Links = names, []string{root}
	if serr := b.st.save(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if err := batch(ctx, "ip", sw, b.switchCommands()); err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	if err := batch(ctx, "tc", sw, b.switchShaping()); err != nil {
		return fmt.Errorf("switch shaping: %w", err)
	}
	return forEach(len(b.spec.Hosts), func(i int) error {
		h := b.spec.Hosts[i]
		ns := hostNetns(k, i+1)
		if err := batch(ctx, "ip", ns, []string{
			fmt.Sprintf("addr add %s/24 dev %s", hostAddr(k, i+1), hostIfName()),
			"link set " + hostIfName() + " up",
			"link set lo up",
		}); err != nil {
			return fmt.Errorf("host %s: %w", h.Name, err)
		}
		if h.Shape != "" {
			if err := batch(ctx, "tc", ns, []string{tbfLine(hostIfName(), h.Shape)}); err != nil {
				return fmt.Errorf("host %s: shape: %w", h.Name, err)
			}
		}
		return nil
	})
}

func (b *builder) switchCommands() []string {
	k := b.st.Index
	cmds := []string{
		"link set lo up",
		"link add core type bridge",
		"link set core up",
		"link set root master core",
		"link set root up",
	}
	for g := range b.spec.groupOrder() {
		br, ga, gb := groupBridge(g), uplinkGroupEnd(g), uplinkCoreEnd(g)
		cmds = append(cmds,
			"link add "+br+" type bridge",
			"link set "+br+" up",
			"link add "+ga+" type veth peer name "+gb,
			"link set "+ga+" master "+br,
			"link set "+ga+" up",
			"link set "+gb+" master core",
			"link set "+gb+" up")
	}
	for i, h := range b.spec.Hosts {
		p := hostPort(i + 1)
		cmds = append(cmds,
			fmt.Sprintf("link add %s type veth peer name %s netns %s", p, hostIfName(), hostNetns(k, i+1)),
			"link set "+p+" master "+groupBridge(b.groupIndex[h.group()]),
			"link set "+p+" up")
	}
	return cmds
}

// switchShaping puts tbf on both ends of every uplink (tbf shapes egress,
// and each end is the egress of one direction) and on the switch side of
// shaped hosts' links.
func (b *builder) switchShaping() []string {
	var lines []string
	groups := b.spec.groupOrder()
	if b.spec.GroupShape != "" && len(groups) > 1 {
		for g := range groups {
			lines = append(lines, tbfLine(uplinkGroupEnd(g), b.spec.GroupShape), tbfLine(uplinkCoreEnd(g), b.spec.GroupShape))
		}
	}
	for i, h := range b.spec.Hosts {
		if h.Shape != "" {
			lines = append(lines, tbfLine(hostPort(i+1), h.Shape))
		}
	}
	return lines
}

// tbfLine limits egress of dev with a token bucket, the way testbed.md
// step 5 verified; the burst grows with the rate so fast shapes are not
// starved by timer granularity. The rate was validated with the spec.
func tbfLine(dev, rate string) string {
	bits, _ := ParseRate(rate)
	return fmt.Sprintf("qdisc add dev %s root tbf rate %dbit burst %d latency 50ms", dev, bits, tbfBurstBytes(bits))
}
