package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Host is one running test-bed host.
type Host struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	Netns string `json:"netns"`
	Group string `json:"group"`
	RDMA  string `json:"rdma,omitempty"`
	// SshdPid is the host's listening sshd, started with `sshd -D`.
	SshdPid int `json:"sshd_pid"`
}

// Testbed is a running instance. Its files are what ssh and pipette-launch
// need to reach the hosts.
type Testbed struct {
	Name  string
	Index int
	// Dir is the state directory; `pipette-testbed down` and DownDir(Dir)
	// remove the instance from it, also after a crash.
	Dir   string
	Hosts []Host
	// Gateway is the root namespace's address on the test-bed subnet (the
	// address the hosts see pipette-launch connect from); Subnet is the /24.
	Gateway, Subnet string
	// KeyFile is the client's private ed25519 key (root on every host).
	KeyFile string
	// KnownHostsFile has every host key under both the name and address.
	KnownHostsFile string
	// SSHConfigFile maps each name (and address) to HostName, User root,
	// IdentityFile, UserKnownHostsFile and StrictHostKeyChecking yes.
	SSHConfigFile string
	// HostsFile lists host names, one a line; AddrsFile the addresses;
	// EtcHostsFile has /etc/hosts lines "addr name".
	HostsFile, AddrsFile, EtcHostsFile string

	mu   sync.Mutex
	down bool
	st   *state
}

type builder struct {
	spec       Spec
	st         *state
	groupIndex map[string]int
}

// sshdReadyTimeout bounds the wait for every sshd to answer.
const sshdReadyTimeout = 20 * time.Second

// Up builds the test-bed described by spec. On error everything already made
// is removed again.
func Up(ctx context.Context, spec Spec) (*Testbed, error) {
	if err := CheckPrerequisites(); err != nil {
		return nil, err
	}
	if spec.Name == "" {
		spec.Name = "testbed"
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	// sshd insists on its privilege-separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("testbed %s: create /run/sshd: %w", spec.Name, err)
	}
	st, err := allocate(spec)
	if err != nil {
		return nil, fmt.Errorf("testbed %s: %w", spec.Name, err)
	}
	b := &builder{spec: spec, st: st, groupIndex: map[string]int{}}
	for i, g := range spec.groupOrder() {
		b.groupIndex[g] = i
	}
	tb, err := b.build(ctx)
	if err != nil {
		if derr := teardown(st); derr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w (state kept in %s)", derr, st.dir))
		}
		return nil, fmt.Errorf("testbed %s up: %w", spec.Name, err)
	}
	return tb, nil
}

func (b *builder) build(ctx context.Context) (*Testbed, error) {
	if err := b.makeKeys(); err != nil {
		return nil, err
	}
	if err := b.buildNetwork(ctx); err != nil {
		return nil, fmt.Errorf("network: %w", err)
	}
	k := b.st.Index
	hosts := make([]Host, len(b.spec.Hosts))
	for i, hs := range b.spec.Hosts {
		hosts[i] = Host{Name: hs.Name, Addr: hostAddr(k, i+1), Netns: hostNetns(k, i+1), Group: hs.group(), RDMA: hs.RDMA}
	}
	cfgs := make([]string, len(hosts))
	if err := forEach(len(hosts), func(i int) (err error) {
		cfgs[i], err = b.prepareHost(hosts[i], b.spec.Hosts[i])
		return err
	}); err != nil {
		return nil, err
	}
	if err := b.writeClientFiles(hosts); err != nil {
		return nil, fmt.Errorf("client files: %w", err)
	}
	for i := range hosts {
		if err := b.startSshd(&hosts[i], cfgs[i]); err != nil {
			return nil, err
		}
	}
	if err := forEach(len(hosts), func(i int) error {
		return b.waitSshd(ctx, hosts[i], sshdReadyTimeout)
	}); err != nil {
		return nil, err
	}
	if b.spec.Slurm {
		if err := b.startSlurm(ctx, hosts); err != nil {
			return nil, fmt.Errorf("slurm: %w", err)
		}
	}
	b.st.Hosts = hosts
	b.st.Ready = true
	if err := b.st.save(); err != nil {
		return nil, err
	}
	return fromState(b.st), nil
}

// forEach runs f for 0..n-1 concurrently and joins the errors.
func forEach(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func fromState(st *state) *Testbed {
	d := st.dir
	return &Testbed{
		Name: st.Name, Index: st.Index, Dir: d, Hosts: append([]Host(nil), st.Hosts...),
		Gateway: gatewayAddr(st.Index), Subnet: subnetPrefix(st.Index) + "0/24",
		KeyFile:        filepath.Join(d, "id_ed25519"),
		KnownHostsFile: filepath.Join(d, "known_hosts"),
		SSHConfigFile:  filepath.Join(d, "ssh_config"),
		HostsFile:      filepath.Join(d, "hosts"),
		AddrsFile:      filepath.Join(d, "hosts.addr"),
		EtcHostsFile:   filepath.Join(d, "etc-hosts"),
		st:             st,
	}
}

// Open attaches to an instance made by another process (e.g. the CLI's up)
// from its state directory.
func Open(dir string) (*Testbed, error) {
	st, err := loadState(dir)
	if err != nil {
		return nil, err
	}
	if !st.Ready {
		return nil, fmt.Errorf("test-bed in %s is not ready (still starting, or failed)", dir)
	}
	return fromState(st), nil
}

// New builds a test-bed for a test and removes it when the test ends. It
// fails the test, naming what to install, when the machine cannot run one.
func New(t testing.TB, spec Spec) *Testbed {
	t.Helper()
	if err := CheckPrerequisites(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	if spec.Name == "" {
		spec.Name = testName(t.Name())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tb, err := Up(ctx, spec)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := tb.Down(); err != nil {
			t.Errorf("testbed down: %v", err)
		}
	})
	return tb
}

var unsafeNameRE = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func testName(s string) string { return unsafeNameRE.ReplaceAllString(s, "_") }

// Down stops every process in the hosts' namespaces and removes the
// namespaces, links and state directory. Calling it again does nothing.
func (tb *Testbed) Down() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.down {
		return nil
	}
	if err := DownDir(tb.Dir); err != nil {
		return err
	}
	tb.down = true
	return nil
}

// Host returns the named host.
func (tb *Testbed) Host(name string) (Host, error) {
	for _, h := range tb.Hosts {
		if h.Name == name {
			return h, nil
		}
	}
	return Host{}, fmt.Errorf("testbed %s: no host %q", tb.Name, name)
}

// Names returns the host names in order.
func (tb *Testbed) Names() []string {
	out := make([]string, len(tb.Hosts))
	for i, h := range tb.Hosts {
		out[i] = h.Name
	}
	return out
}

// Addrs returns the host addresses in order.
func (tb *Testbed) Addrs() []string {
	out := make([]string, len(tb.Hosts))
	for i, h := range tb.Hosts {
		out[i] = h.Addr
	}
	return out
}

// SSHArgs returns OpenSSH client arguments that reach host, ending with the
// host name: exec.Command("ssh", append(tb.SSHArgs(h), "hostname")...).
// UserKnownHostsFile and IdentityFile are explicit because ssh finds ~/.ssh
// through the password database, not $HOME.
func (tb *Testbed) SSHArgs(host string) []string {
	return []string{
		"-F", tb.SSHConfigFile,
		"-o", "UserKnownHostsFile=" + tb.KnownHostsFile,
		"-o", "IdentityFile=" + tb.KeyFile,
		"-o", "StrictHostKeyChecking=yes",
		"-o", "BatchMode=yes",
		"-o", "ConnectTimeout=10",
		host,
	}
}

// Exec runs argv in host's network namespace (not its mount namespace, so
// with the machine's /tmp and /sys/class) and returns its stdout.
func (tb *Testbed) Exec(ctx context.Context, host string, argv ...string) ([]byte, error) {
	h, err := tb.Host(host)
	if err != nil {
		return nil, err
	}
	out, err := output(ctx, "ip", append([]string{"netns", "exec", h.Netns}, argv...)...)
	if err != nil {
		return out, fmt.Errorf("host %s: %w", host, err)
	}
	return out, nil
}

// ExecInHost runs argv as a login on host would see it: in the network,
// mount (private /tmp, fake /sys/class) and UTS namespaces of its sshd.
func (tb *Testbed) ExecInHost(ctx context.Context, host string, argv ...string) ([]byte, error) {
	h, err := tb.Host(host)
	if err != nil {
		return nil, err
	}
	args := append([]string{"-t", strconv.Itoa(h.SshdPid), "-m", "-u", "-n", "--"}, argv...)
	out, err := output(ctx, "nsenter", args...)
	if err != nil {
		return out, fmt.Errorf("host %s: %w", host, err)
	}
	return out, nil
}

// Pids lists every process in host's network namespace, sshd included.
func (tb *Testbed) Pids(host string) ([]int, error) {
	h, err := tb.Host(host)
	if err != nil {
		return nil, err
	}
	return netnsPids(h.Netns)
}

// netnsPids lists the processes whose network namespace is ns, as `ip netns
// pids` does, without starting a process.
func netnsPids(ns string) ([]int, error) {
	by, err := pidsByNetns([]string{ns})
	return by[ns], err
}

// pidsByNetns scans /proc once for processes in any of the named
// namespaces, matching /proc/PID/ns/net against /run/netns/NAME by inode.
func pidsByNetns(names []string) (map[string][]int, error) {
	inode := map[uint64]string{}
	for _, ns := range names {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/run/netns", ns), &st); err != nil {
			return nil, fmt.Errorf("netns %s: %w", ns, err)
		}
		inode[st.Ino] = ns
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			continue // exited, or a kernel thread
		}
		// link reads "net:[4026532123]"
		ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "net:["), "]"), 10, 64)
		if err != nil {
			continue
		}
		if ns, ok := inode[ino]; ok {
			out[ns] = append(out[ns], pid)
		}
	}
	return out, nil
}

// LinkUp brings back host's link that a test cut (ip link set eth0 down in
// its namespace: no FIN, no RST) and ends its sshd's per-connection
// processes, which still hold connections that died meanwhile (not the
// listener), so that they are not taken for a job's leftovers.
func (tb *Testbed) LinkUp(host string) error {
	if b, err := tb.Exec(context.Background(), host, "ip", "link", "set", hostIfName(), "up"); err != nil {
		return fmt.Errorf("%w: %s", err, b)
	}
	h, err := tb.Host(host)
	if err != nil {
		return err
	}
	procs, err := tb.Processes(host)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if p.Pid != h.SshdPid && strings.HasPrefix(p.Cmdline, "sshd: ") {
			syscall.Kill(p.Pid, syscall.SIGKILL)
		}
	}
	return nil
}

// Proc is a process running on a host.
type Proc struct {
	Pid     int
	Cmdline string
}

// Processes lists host's processes except its listening sshd and the
// test-bed's own daemons (slurmd, slurmctld), so a test can assert that
// nothing of a job is left running.
func (tb *Testbed) Processes(host string) ([]Proc, error) {
	h, err := tb.Host(host)
	if err != nil {
		return nil, err
	}
	pids, err := netnsPids(h.Netns)
	if err != nil {
		return nil, err
	}
	ours := map[int]bool{h.SshdPid: true}
	for _, o := range tb.st.Daemons {
		ours[o.Pid] = true
	}
	var procs []Proc
	for _, p := range pids {
		if ours[p] || isDaemonHelper(p, ours) {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil {
			continue // exited since listing
		}
		procs = append(procs, Proc{Pid: p, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))})
	}
	return procs, nil
}

// isDaemonHelper reports a helper a test-bed daemon keeps for itself
// (slurmctld's slurmscriptd), which is no job's leftover. Job steps
// (slurmstepd and what it starts) are not helpers: they must be gone after
// a job.
func isDaemonHelper(pid int, daemons map[int]bool) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "slurmscriptd" {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return false
	}
	ppid, err := strconv.Atoi(f[1])
	return err == nil && daemons[ppid]
}
