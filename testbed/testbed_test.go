package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// hangBound bounds a test's command so that a hang fails instead of
// blocking the run. It is no speed check: on CI's 2 busy cores one ssh
// login (which runs the machine's shell start-up, pyenv init included)
// has taken several seconds, and a 10 s deadline shared by three
// commands ran out (TestExecHelpers at stop 39).
const hangBound = 2 * time.Minute

func sshOut(t *testing.T, tb *Testbed, host string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	c := exec.CommandContext(ctx, "ssh", append(tb.SSHArgs(host), cmd...)...)
	// Stdout only: a login runs the machine's own shell start-up, which
	// may write to stderr (CI's pyenv init raced its rehash against a
	// concurrent login's and printed "pyenv: cannot rehash").
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("ssh %s %v: %v: %s%s", host, cmd, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func TestUpSSHHostnameTmpAndRDMA(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{
		{Name: "ib1", RDMA: RDMAInfiniBand, RateGbitPerS: 200},
		{Name: "roce1", RDMA: RDMARoCE, RateGbitPerS: 100},
		{Name: "eth1"},
	}})
	// One login per host prints: hostname, its interfaces (through the
	// private /sys/class), the fake HCA's link layer and rate, whether ib1's
	// /tmp file is visible.
	const probe = `hostname; ls /sys/class/net | tr '\n' ' '; echo
p=/sys/class/infiniband/mlx5_0/ports/1
cat $p/link_layer $p/rate 2>/dev/null || echo none
test -e /tmp/only-on-ib1 && echo tmp-shared || echo tmp-private`
	sshOut(t, tb, "ib1", "echo secret > /tmp/only-on-ib1")
	tests := []struct {
		host, want string
	}{
		{"ib1", "ib1\neth0 lo \nInfiniBand\n200 Gb/sec (4X HDR)\ntmp-shared"},
		{"roce1", "roce1\neth0 lo \nEthernet\n100 Gb/sec (4X EDR)\ntmp-private"},
		{"eth1", "eth1\neth0 lo \nnone\ntmp-private"},
		// by address too: known_hosts holds each key under name and address
		{tb.Hosts[2].Addr, "eth1\neth0 lo \nnone\ntmp-private"},
	}
	for _, tt := range tests {
		if got := sshOut(t, tb, tt.host, probe); got != tt.want {
			t.Errorf("ssh %s:\n%s\nwant:\n%s", tt.host, got, tt.want)
		}
	}
	if _, err := os.Stat("/tmp/only-on-ib1"); err == nil {
		t.Errorf("the machine's /tmp sees the host's file")
	}
	// RoCE v2 GID, the HCA's netdev, and other hosts' names resolving
	got := sshOut(t, tb, "roce1", "cat /sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3 /sys/class/infiniband/mlx5_0/device/net/eth0/operstate; getent hosts ib1")
	// getent pads the address to 15 columns (glibc's "%-15s %s"): the
	// spacing depends on the instance's index.
	if want := fmt.Sprintf("RoCE v2\nup\n%-15s ib1", tb.Hosts[0].Addr); got != want {
		t.Errorf("roce1: %q, want %q", got, want)
	}
}

// iperf3Mbit runs iperf3 for one second from client to server (both test-bed
// hosts) and returns the received rate in Mbit/s.
func iperf3Mbit(t *testing.T, tb *Testbed, server, client string) float64 {
	t.Helper()
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Fatalf("iperf3 missing: install the Debian package iperf3")
	}
	srv, err := tb.Host(server)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", srv.Netns, "iperf3", "-s", "-1", "-B", srv.Addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	var out []byte
	for range 100 { // the server needs a moment to listen
		out, err = tb.Exec(ctx, client, "iperf3", "-c", srv.Addr, "-t", "1", "--json")
		if !strings.Contains(string(out), "Connection refused") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 %s -> %s: %v: %s", client, server, err, out)
	}
	var res struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iperf3 json: %v: %s", err, out)
	}
	if res.End.SumReceived.BitsPerSecond <= 0 {
		t.Fatalf("iperf3 %s -> %s: no rate in output: %s", client, server, out)
	}
	return res.End.SumReceived.BitsPerSecond / 1e6
}

func TestGroupShaping(t *testing.T) {
	tb := New(t, Spec{GroupShape: "100mbit", Hosts: []HostSpec{
		{Name: "a1", Group: "ib", RDMA: RDMAInfiniBand},
		{Name: "a2", Group: "ib", RDMA: RDMAInfiniBand},
		{Name: "b1", Group: "eth"},
	}})
	inside := iperf3Mbit(t, tb, "a1", "a2")
	between := iperf3Mbit(t, tb, "a1", "b1")
	t.Logf("inside group %.0f Mbit/s, between groups %.0f Mbit/s", inside, between)
	if inside < 1000 {
		t.Errorf("inside a group: %.0f Mbit/s, want > 1000 (unshaped)", inside)
	}
	if between > 200 || between < 20 {
		t.Errorf("between groups: %.0f Mbit/s, want about 100 (shaped to 100mbit)", between)
	}
}

func TestHostShaping(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{{Name: "fast"}, {Name: "slow", Shape: "50mbit"}}})
	r := iperf3Mbit(t, tb, "fast", "slow")
	if r > 100 || r < 10 {
		t.Errorf("slow host link: %.0f Mbit/s, want about 50", r)
	}
}

// made lists what an instance created, to check that teardown removed it.
type made struct {
	netns []string
	link  string
	pids  []int
	dir   string
}

func madeBy(t *testing.T, tb *Testbed) made {
	t.Helper()
	m := made{link: rootLink(tb.Index), dir: tb.Dir}
	for _, h := range tb.Hosts {
		m.netns = append(m.netns, h.Netns)
		pids, err := tb.Pids(h.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(pids, h.SshdPid) {
			t.Fatalf("host %s: sshd pid %d not among netns pids %v", h.Name, h.SshdPid, pids)
		}
		m.pids = append(m.pids, pids...)
	}
	m.netns = append(m.netns, swNetns(tb.Index))
	return m
}

func assertGone(t *testing.T, m made) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	for _, ns := range m.netns {
		if listed[ns] {
			t.Errorf("netns %s still exists", ns)
		}
	}
	if out, err := exec.Command("ip", "link", "show", "dev", m.link).CombinedOutput(); err == nil {
		t.Errorf("link %s still exists: %s", m.link, out)
	}
	for _, p := range m.pids {
		if _, err := processStartTime(p); err == nil {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			t.Errorf("process %d (%q) still running", p, cmdline)
		}
	}
	if _, err := os.Stat(m.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state dir %s still exists (%v)", m.dir, err)
	}
}

func TestDownRemovesEverythingAndLeftoverJobs(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{{Name: "n1"}, {Name: "n2", RDMA: RDMARoCE}}})
	// a job that ignores its session ending, as a crashed launcher leaves it
	sshOut(t, tb, "n1", "setsid sleep 300 </dev/null >/dev/null 2>&1 &")
	// On a busy machine the background shell may not have exec'd sleep yet
	// when ssh returns: wait for it (bounded), then check.
	var procs []Proc
	for deadline := time.Now().Add(10 * time.Second); ; {
		var err error
		if procs, err = tb.Processes("n1"); err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(procs, func(p Proc) bool { return p.Cmdline == "sleep 300" }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.ContainsFunc(procs, func(p Proc) bool { return p.Cmdline == "sleep 300" }) {
		t.Fatalf("Processes(n1) = %v, want the leftover sleep", procs)
	}
	if procs, _ := tb.Processes("n2"); len(procs) != 0 {
		t.Errorf("Processes(n2) = %v, want none (sshd listener excluded)", procs)
	}
	m := madeBy(t, tb)
	if err := tb.Down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	assertGone(t, m)
	if err := tb.Down(); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func TestDownAfterCrashFromStateDir(t *testing.T) {
	ctx := context.Background()
	tb, err := Up(ctx, Spec{Name: "crash", Hosts: []HostSpec{{Name: "c1"}, {Name: "c2"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := madeBy(t, tb)
	t.Cleanup(func() { DownDir(m.dir) })
	dir := tb.Dir
	tb = nil // the process that made it is gone; only the state dir remains
	// and it crashed right after creating its last namespace, before
	// recording it
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Netns = st.Netns[:len(st.Netns)-1]
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	if err := DownDir(dir); err != nil {
		t.Fatalf("DownDir: %v", err)
	}
	assertGone(t, m)
}

func TestReclaimAbandonedInstance(t *testing.T) {
	tb, err := Up(context.Background(), Spec{Name: "abandoned", Hosts: []HostSpec{{Name: "r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := madeBy(t, tb)
	t.Cleanup(func() { DownDir(m.dir) })
	if err := reclaimIfAbandoned(tb.Dir); err == nil {
		t.Fatalf("reclaim took an instance whose owner is alive")
	}
	if _, err := os.Stat(tb.Dir); err != nil {
		t.Fatalf("live instance touched: %v", err)
	}
	// pretend the owner died: same pid, different start time
	st, err := loadState(tb.Dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Owner.StartTime++
	if err := st.save(); err != nil {
		t.Fatal(err)
	}
	unlock, err := lockRoot(filepath.Dir(tb.Dir))
	if err != nil {
		t.Fatal(err)
	}
	err = reclaimIfAbandoned(tb.Dir)
	unlock()
	if err != nil {
		t.Fatalf("reclaim of abandoned instance: %v", err)
	}
	assertGone(t, m)
}

func TestTwoTestbedsConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	tbs := make([]*Testbed, 2)
	errs := make([]error, 2)
	for i := range tbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// same host names on purpose: names are per instance
			tbs[i], errs[i] = Up(context.Background(), Spec{Name: fmt.Sprintf("conc%d", i), Hosts: []HostSpec{{Name: "x1"}, {Name: "x2"}}})
		}()
	}
	wg.Wait()
	for i, tb := range tbs {
		if errs[i] != nil {
			t.Fatalf("Up %d: %v", i, errs[i])
		}
		t.Cleanup(func() { tb.Down() })
	}
	if tbs[0].Index == tbs[1].Index || tbs[0].Hosts[0].Addr == tbs[1].Hosts[0].Addr {
		t.Fatalf("instances share index %d / address %s", tbs[0].Index, tbs[0].Hosts[0].Addr)
	}
	for _, tb := range tbs {
		if got := sshOut(t, tb, tb.Hosts[1].Addr, "hostname; cat /proc/net/fib_trie | grep -c 198.18"); !strings.HasPrefix(got, "x2\n") {
			t.Errorf("%s: %q", tb.Name, got)
		}
	}
	// a host of one instance has no route to the other's: different subnets
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	if out, err := tbs[0].Exec(ctx, "x1", "ip", "route", "get", tbs[1].Hosts[0].Addr); err == nil {
		t.Errorf("instance 0 has a route to instance 1: %s", out)
	}
}

func TestExecHelpers(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{{Name: "e1", RDMA: RDMAInfiniBand}}})
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	out, err := tb.Exec(ctx, "e1", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if err != nil || !strings.Contains(string(out), tb.Hosts[0].Addr+"/24") {
		t.Errorf("Exec ip addr: %v: %s", err, out)
	}
	sshOut(t, tb, "e1", "echo hi > /tmp/mark")
	out, err = tb.ExecInHost(ctx, "e1", "sh", "-c", "hostname; cat /tmp/mark; cat /sys/class/infiniband/mlx5_0/ports/1/link_layer")
	if got := strings.TrimSpace(string(out)); err != nil || got != "e1\nhi\nInfiniBand" {
		t.Errorf("ExecInHost = %q, %v", got, err)
	}
	if _, err := tb.Exec(ctx, "nope", "true"); err == nil {
		t.Errorf("Exec on unknown host: no error")
	}
	for _, f := range []string{tb.KeyFile, tb.KnownHostsFile, tb.SSHConfigFile, tb.HostsFile, tb.AddrsFile, tb.EtcHostsFile} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("missing file: %v", err)
		}
	}
	kh, _ := os.ReadFile(tb.KnownHostsFile)
	if !strings.HasPrefix(string(kh), "e1,"+tb.Hosts[0].Addr+" ssh-ed25519 ") {
		t.Errorf("known_hosts = %q", kh)
	}
	names, _ := os.ReadFile(tb.HostsFile)
	if string(names) != "e1\n" {
		t.Errorf("hosts file = %q", names)
	}
	// Open from another process's point of view sees the same instance
	o, err := Open(tb.Dir)
	if err != nil || o.Hosts[0] != tb.Hosts[0] || o.SSHConfigFile != tb.SSHConfigFile {
		t.Errorf("Open = %+v, %v", o, err)
	}
}

func TestWrongHostKeyRefused(t *testing.T) {
	tb := New(t, Spec{Hosts: []HostSpec{{Name: "k1"}, {Name: "k2"}}})
	// k2's address with k1's key: ssh must refuse (StrictHostKeyChecking yes)
	kh, err := os.ReadFile(tb.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(kh)), "\n")
	k1key := strings.SplitN(lines[0], " ", 2)[1]
	bad := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(bad, []byte("k2,"+tb.Hosts[1].Addr+" "+k1key+"\n"), 0o600)
	args := append(tb.SSHArgs("k2"), "true")
	for i, a := range args {
		if strings.HasPrefix(a, "UserKnownHostsFile=") {
			args[i] = "UserKnownHostsFile=" + bad
		}
	}
	out, err := exec.Command("ssh", args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "HOST IDENTIFICATION HAS CHANGED") {
		t.Errorf("ssh with wrong host key: err=%v out=%s", err, out)
	}
}

func TestPrerequisitesNamePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckPrerequisites()
	if err == nil || !strings.Contains(err.Error(), "install the Debian package iproute2") {
		t.Errorf("CheckPrerequisites with empty PATH = %v, want it to name iproute2", err)
	}
}

// BenchmarkUpDown16 measures building and removing a 16-host test-bed (the
// size of the launcher's fan-out benchmark).
func BenchmarkUpDown16(b *testing.B) {
	spec := Spec{Name: "bench"}
	for i := 1; i <= 16; i++ {
		spec.Hosts = append(spec.Hosts, HostSpec{Name: fmt.Sprintf("node%02d", i)})
	}
	var up, down time.Duration
	for b.Loop() {
		t0 := time.Now()
		tb, err := Up(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := tb.Down(); err != nil {
			b.Fatal(err)
		}
		up += t1.Sub(t0)
		down += time.Since(t1)
	}
	b.ReportMetric(up.Seconds()/float64(b.N), "up-s/op")
	b.ReportMetric(down.Seconds()/float64(b.N), "down-s/op")
}

// TestHostNamesThatDoNotResolve: Names none leaves every host's name
// (its own included) unresolvable on the hosts; Names loopback maps a
// host's own name to 127.0.1.1, as Debian images do, and others to their
// addresses.
func TestHostNamesThatDoNotResolve(t *testing.T) {
	for _, tc := range []struct {
		names string
		want  map[string]string // getent hosts NAME on host a1 -> answer ("" none)
	}{
		{NamesNone, map[string]string{"a1": "", "a2": ""}},
		{NamesLoopback, map[string]string{"a1": "127.0.1.1", "a2": "ADDR2"}},
	} {
		t.Run(tc.names, func(t *testing.T) {
			tb := New(t, Spec{Names: tc.names, Hosts: []HostSpec{{Name: "a1"}, {Name: "a2"}}})
			if got := sshOut(t, tb, "a1", "hostname"); got != "a1" {
				t.Fatalf("hostname %q, want a1 (ssh by name still works from the launching machine)", got)
			}
			for name, want := range tc.want {
				want = strings.ReplaceAll(want, "ADDR2", tb.Hosts[1].Addr)
				got := sshOut(t, tb, "a1", "getent hosts "+name+" | awk '{print $1}'; true")
				if got != want {
					t.Errorf("on a1, %s resolves to %q, want %q", name, got, want)
				}
			}
		})
	}
	if err := (&Spec{Names: "dns", Hosts: []HostSpec{{Name: "a1"}}}).Validate(); err == nil || !strings.Contains(err.Error(), `names "dns"`) {
		t.Errorf("Names dns: err %v, want one naming the field", err)
	}
}

// The teardown's decision, with ip scripted: the kernel removed the link
// between our look and our delete, so ip's delete failed with one wording
// or the other ("RTNETLINK answers: No such device" is what failed CI; the
// rule before matched only "Cannot find device"), and the link is gone:
// done. A delete that fails while the link stays is an error.
func TestDeleteLinkDecidesByTheLinkNotTheMessage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delErr  string
		goneAft bool
		wantErr bool
	}{
		{"RTNETLINK wording, gone", "exit status 2: RTNETLINK answers: No such device", true, false},
		{"Cannot find device, gone", `exit status 1: Cannot find device "plb1"`, true, false},
		{"refused, still there", "exit status 2: RTNETLINK answers: Operation not supported", false, true},
	} {
		shows := 0
		ipRun := func(_ context.Context, _ string, args ...string) error {
			switch args[1] {
			case "show":
				shows++
				if shows > 1 && tc.goneAft {
					return errors.New(`exit status 1: Device "plb1" does not exist.`)
				}
				return nil
			case "del":
				return errors.New(tc.delErr)
			}
			return fmt.Errorf("unexpected ip %v", args)
		}
		err := deleteLinkWith(context.Background(), "plb1", ipRun)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: deleteLink = %v, want error %v", tc.name, err, tc.wantErr)
		}
	}
}

// deleteLink is done when the link is gone, however it went: a veth whose
// peer's namespace was just deleted may vanish between our look and our
// delete (the kernel frees the namespace's devices asynchronously), which
// once failed CI's teardown with "RTNETLINK answers: No such device". A link
// that is still there after a failed delete is an error.
func TestDeleteLinkGoneIsDone(t *testing.T) {
	if err := CheckPrerequisites(); err != nil {
		t.Fatalf("testbed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("plbdl%d", os.Getpid()%100000)
	ns := "pipette-dl-" + name
	for i := 0; i < 20; i++ {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
		if err := run(ctx, "ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", ns); err != nil {
			run(ctx, "ip", "netns", "del", ns)
			t.Fatal(err)
		}
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			t.Fatal(err)
		}
		if err := deleteLink(ctx, name); err != nil {
			t.Fatalf("round %d: deleteLink while its peer's namespace goes = %v, want nil", i, err)
		}
		if linkExists(ctx, name, run) {
			t.Fatalf("round %d: %s still exists after deleteLink", i, name)
		}
	}
	if err := deleteLink(ctx, name); err != nil {
		t.Errorf("deleteLink of a link that does not exist = %v, want nil", err)
	}
	if err := deleteLink(ctx, "lo"); err == nil {
		t.Errorf("deleteLink(lo) = nil, want the kernel's refusal (the loopback device cannot be deleted)")
	}
}
