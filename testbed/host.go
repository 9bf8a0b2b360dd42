package testbed

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// sshdScript runs inside the host's network namespace and fresh mount and
// UTS namespaces (testbed.md step 3). The private /sys/class is mounted
// before the private /tmp, as testbed.md prescribes. The host's own
// /etc/hosts names the test-bed hosts as Spec.Names says (by default every
// host, as on a real cluster; or none, or its own name as 127.0.1.1, as in
// many containers and cloud images). exec keeps sshd's pid the one Go
// started.
const sshdScript = `set -e
hostname "$1"
mount --bind "$2" /sys/class
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount --bind "$6" /etc/hosts
exec "$3" -D -f "$4" -E "$5"`

func (b *builder) hostDir(name string) string { return filepath.Join(b.st.dir, "host", name) }

// writeKey writes an OpenSSH ed25519 key pair, as ssh-keygen would (in Go:
// one process start per key is the slowest part of Up on a loaded machine).
func writeKey(path, comment string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return err
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + comment + "\n"
	return os.WriteFile(path+".pub", []byte(line), 0o644)
}

// makeKeys creates the client key, authorized_keys and one host key per host.
func (b *builder) makeKeys() error {
	key := filepath.Join(b.st.dir, "id_ed25519")
	if err := writeKey(key, "pipette-testbed-client"); err != nil {
		return fmt.Errorf("client key: %w", err)
	}
	for _, h := range b.spec.Hosts {
		if err := os.MkdirAll(b.hostDir(h.Name), 0o700); err != nil {
			return err
		}
		if err := writeKey(filepath.Join(b.hostDir(h.Name), "ssh_host_ed25519_key"), h.Name); err != nil {
			return fmt.Errorf("host %s: host key: %w", h.Name, err)
		}
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.st.dir, "authorized_keys"), pub, 0o600)
}

// writeClassDir builds the host's private /sys/class as testbed.md step 4
// does: net, listing only the host's interfaces (lo and the veth eth0, both
// virtual devices, as /sys/class/net inside its namespace shows them), plus
// the fake RDMA device if any. The symlinks resolve in the host's own sysfs.
// Other classes are left out on purpose: copying them costs thousands of
// files per host, and reading their attributes has side effects
// (zram-control/hot_add adds a device on every read). The machine's own
// RDMA devices are thus hidden from the hosts.
func writeClassDir(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		return err
	}
	for _, ifname := range []string{"lo", hostIfName()} {
		if err := os.Symlink("../../devices/virtual/net/"+ifname, filepath.Join(dir, "net", ifname)); err != nil {
			return err
		}
	}
	return nil
}

// writeFakeRDMA lays out /sys/class/infiniband/mlx5_0 the way a real mlx5
// HCA shows it: link_layer InfiniBand for IB, Ethernet for RoCE (with RoCE
// v1/v2 GIDs on the host's IPv4 address, so GID index 3 is RoCE v2 IPv4 as on
// real NICs).
func writeFakeRDMA(classDir string, h HostSpec, addr string) error {
	if h.RDMA == RDMANone {
		return nil
	}
	dev := filepath.Join(classDir, "infiniband", "mlx5_0")
	port := filepath.Join(dev, "ports", "1")
	files := map[string]string{
		"hca_type":               "MT4123",
		"fw_ver":                 "20.31.1014",
		"board_id":               "MT_0000000223",
		"node_type":              "1: CA",
		"port/state":             "4: ACTIVE",
		"port/phys_state":        "5: LinkUp",
		"port/rate":              rdmaRateText(h.rate()),
		"port/lid":               "0x0",
		"port/gids/0":            "fe80:0000:0000:0000:0000:0000:0000:0001",
		"port/gid_attrs/types/0": "IB/RoCE v1",
	}
	if h.RDMA == RDMAInfiniBand {
		files["port/link_layer"] = "InfiniBand"
		files["port/lid"] = "0x1"
	} else {
		files["port/link_layer"] = "Ethernet"
		v4 := ipv4MappedGID(addr)
		files["port/gids/1"] = files["port/gids/0"]
		files["port/gids/2"] = v4
		files["port/gids/3"] = v4
		files["port/gid_attrs/types/1"] = "RoCE v2"
		files["port/gid_attrs/types/2"] = "IB/RoCE v1"
		files["port/gid_attrs/types/3"] = "RoCE v2"
		for i := 0; i < 4; i++ {
			files[fmt.Sprintf("port/gid_attrs/ndevs/%d", i)] = hostIfName()
		}
	}
	for rel, content := range files {
		p := filepath.Join(dev, rel)
		if strings.HasPrefix(rel, "port/") {
			p = filepath.Join(port, strings.TrimPrefix(rel, "port/"))
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			return err
		}
	}
	// device/net/<netdev> maps the HCA to its network interface, as on a
	// real PCI device. Absolute, so it resolves in the host's mount view.
	if err := os.MkdirAll(filepath.Join(dev, "device", "net"), 0o755); err != nil {
		return err
	}
	return os.Symlink("/sys/class/net/"+hostIfName(), filepath.Join(dev, "device", "net", hostIfName()))
}

func ipv4MappedGID(addr string) string {
	ip := net.ParseIP(addr).To4()
	return fmt.Sprintf("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", ip[0], ip[1], ip[2], ip[3])
}

func (b *builder) writeSshdConfig(h Host) (string, error) {
	dir := b.hostDir(h.Name)
	cfg := strings.Join([]string{
		"# written by pipette-testbed for host " + h.Name,
		"ListenAddress " + h.Addr,
		"Port 22",
		"HostKey " + filepath.Join(dir, "ssh_host_ed25519_key"),
		"AuthorizedKeysFile " + filepath.Join(b.st.dir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"PidFile none",
		"StrictModes no",
		"MaxStartups 200",
		"MaxSessions 100",
		"UseDNS no",
		"PrintMotd no",
		"X11Forwarding no",
		"Subsystem sftp internal-sftp",
		"",
	}, "\n")
	p := filepath.Join(dir, "sshd_config")
	return p, os.WriteFile(p, []byte(cfg), 0o600)
}

// prepareHost builds the host's private /sys/class and sshd config.
func (b *builder) prepareHost(h Host, hs HostSpec) (string, error) {
	classDir := filepath.Join(b.hostDir(h.Name), "class")
	if err := writeClassDir(classDir); err != nil {
		return "", fmt.Errorf("host %s: private /sys/class: %w", h.Name, err)
	}
	if err := writeFakeRDMA(classDir, hs, h.Addr); err != nil {
		return "", fmt.Errorf("host %s: fake RDMA sysfs: %w", h.Name, err)
	}
	cfg, err := b.writeSshdConfig(h)
	if err != nil {
		return "", fmt.Errorf("host %s: sshd config: %w", h.Name, err)
	}
	return cfg, nil
}

// startSshd starts the host's sshd detached (own session) so it outlives a
// CLI `up`; a goroutine reaps it when this process made it.
func (b *builder) startSshd(h *Host, cfg string) error {
	dir := b.hostDir(h.Name)
	out, err := os.OpenFile(filepath.Join(dir, "sshd.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("ip", "netns", "exec", h.Netns, "unshare", "-m", "-u", "--propagation", "private",
		"sh", "-c", sshdScript, "sh", h.Name, filepath.Join(dir, "class"), sshdPath, cfg, filepath.Join(dir, "sshd.log"),
		filepath.Join(dir, hostsInsideFile))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("host %s: start sshd: %w", h.Name, err)
	}
	go cmd.Wait()
	st, err := processStartTime(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("host %s: sshd exited at once: %s", h.Name, b.sshdLogTail(h.Name))
	}
	h.SshdPid = cmd.Process.Pid
	b.st.Sshd = append(b.st.Sshd, owner{Pid: cmd.Process.Pid, StartTime: st})
	return b.st.save()
}

// waitSshd polls until the host's sshd answers with an SSH banner.
func (b *builder) waitSshd(ctx context.Context, h Host, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if bannerOK(h.Addr) {
			return nil
		}
		if _, err := processStartTime(h.SshdPid); err != nil {
			return fmt.Errorf("host %s: sshd exited: %s", h.Name, b.sshdLogTail(h.Name))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("host %s: sshd not answering on %s:22 after %s: %s", h.Name, h.Addr, timeout, b.sshdLogTail(h.Name))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("host %s: wait for sshd: %w", h.Name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func bannerOK(addr string) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "22"), 500*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

func (b *builder) sshdLogTail(name string) string {
	var parts []string
	for _, f := range []string{"sshd.out", "sshd.log"} {
		data, err := os.ReadFile(filepath.Join(b.hostDir(name), f))
		if err != nil || len(data) == 0 {
			continue
		}
		s := strings.TrimSpace(string(data))
		if len(s) > 800 {
			s = "..." + s[len(s)-800:]
		}
		parts = append(parts, f+": "+s)
	}
	if len(parts) == 0 {
		return "(no sshd output)"
	}
	return strings.Join(parts, "; ")
}

// hostsInsideFile, in each host's directory, is bind-mounted over the
// host's /etc/hosts.
const hostsInsideFile = "etc-hosts.inside"

// etcHostsInside is the /etc/hosts host i sees under the spec's Names.
func etcHostsInside(names string, hosts []Host, i int) string {
	var b strings.Builder
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	if names == NamesNone {
		return b.String()
	}
	for j, h := range hosts {
		if j == i && names == NamesLoopback {
			fmt.Fprintf(&b, "127.0.1.1\t%s\n", h.Name)
			continue
		}
		fmt.Fprintf(&b, "%s\t%s\n", h.Addr, h.Name)
	}
	return b.String()
}

// writeClientFiles writes known_hosts (each key under name and address),
// ssh_config, and the host lists pipette-launch and /etc/hosts users want.
func (b *builder) writeClientFiles(hosts []Host) error {
	d := b.st.dir
	var kh, cfg, names, addrs, etc strings.Builder
	fmt.Fprintf(&cfg, "# pipette-testbed %q: use with ssh -F %s\n", b.st.Name, filepath.Join(d, "ssh_config"))
	for _, h := range hosts {
		pub, err := os.ReadFile(filepath.Join(b.hostDir(h.Name), "ssh_host_ed25519_key.pub"))
		if err != nil {
			return err
		}
		f := strings.Fields(string(pub))
		if len(f) < 2 {
			return fmt.Errorf("host %s: malformed host key", h.Name)
		}
		fmt.Fprintf(&kh, "%s,%s %s %s\n", h.Name, h.Addr, f[0], f[1])
		fmt.Fprintf(&cfg, "\nHost %s %s\n  HostName %s\n  User root\n  Port 22\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  StrictHostKeyChecking yes\n  BatchMode yes\n",
			h.Name, h.Addr, h.Addr, filepath.Join(d, "id_ed25519"), filepath.Join(d, "known_hosts"))
		fmt.Fprintln(&names, h.Name)
		fmt.Fprintln(&addrs, h.Addr)
		fmt.Fprintf(&etc, "%s\t%s\n", h.Addr, h.Name)
	}
	for name, content := range map[string]string{
		"known_hosts": kh.String(), "ssh_config": cfg.String(),
		"hosts": names.String(), "hosts.addr": addrs.String(), "etc-hosts": etc.String(),
	} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for i, h := range hosts {
		inside := etcHostsInside(b.spec.Names, hosts, i)
		if err := os.WriteFile(filepath.Join(b.hostDir(h.Name), hostsInsideFile), []byte(inside), 0o644); err != nil {
			return err
		}
	}
	return nil
}
