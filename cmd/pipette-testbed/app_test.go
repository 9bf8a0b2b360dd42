package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/testbed"
)

type hostWant struct{ name, group, rdma string }

func TestUpOptionsSpec(t *testing.T) {
	tests := []struct {
		name  string
		opts  upOptions
		want  []hostWant
		shape string
		err   string
	}{
		{name: "default four hosts", opts: upOptions{Prefix: "node"},
			want: []hostWant{{"node01", "default", ""}, {"node02", "default", ""}, {"node03", "default", ""}, {"node04", "default", ""}}},
		{name: "groups with rdma field and --roce", opts: upOptions{Prefix: "n", Groups: "ib:2:ib,r:1,eth:1", RoCE: []string{"r"}, Shape: "100mbit"},
			want: []hostWant{{"n01", "ib", "infiniband"}, {"n02", "ib", "infiniband"}, {"n03", "r", "roce"}, {"n04", "eth", ""}}, shape: "100mbit"},
		{name: "--ib flag, hosts agree", opts: upOptions{Prefix: "h", Hosts: 2, Groups: "a:1,b:1", IB: []string{"a"}},
			want: []hostWant{{"h01", "a", "infiniband"}, {"h02", "b", ""}}},
		{name: "wide numbering", opts: upOptions{Prefix: "x", Hosts: 100},
			want: nil},
		{name: "hosts disagree", opts: upOptions{Prefix: "n", Hosts: 3, Groups: "a:1,b:1"}, err: "--hosts 3 but --groups"},
		{name: "bad group item", opts: upOptions{Prefix: "n", Groups: "a"}, err: "want NAME:COUNT"},
		{name: "bad count", opts: upOptions{Prefix: "n", Groups: "a:0"}, err: "not a positive number"},
		{name: "bad rdma", opts: upOptions{Prefix: "n", Groups: "a:1:omnipath"}, err: `RDMA "omnipath"`},
		{name: "unknown --ib group", opts: upOptions{Prefix: "n", Groups: "a:1", IB: []string{"b"}}, err: "--ib b: no such group"},
		{name: "ib and roce on one group", opts: upOptions{Prefix: "n", Groups: "a:1:roce", IB: []string{"a"}}, err: "already has RDMA"},
		{name: "shape with one group", opts: upOptions{Prefix: "n", Shape: "100mbit"}, err: "at least two --groups"},
		{name: "bad shape", opts: upOptions{Prefix: "n", Groups: "a:1,b:1", Shape: "fast"}, err: "group shape"},
		{name: "bad prefix", opts: upOptions{Prefix: "Node"}, err: "lower-case"},
		{name: "host shape unknown host", opts: upOptions{Prefix: "n", Hosts: 2, HostShape: "n03=1gbit"}, err: "no host n03"},
		{name: "host shape bad item", opts: upOptions{Prefix: "n", Hosts: 2, HostShape: "n01"}, err: "want HOST=RATE"},
		{name: "host shape bad rate", opts: upOptions{Prefix: "n", Hosts: 2, HostShape: "n01=quick"}, err: "n01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := tt.opts.spec()
			if tt.err != "" {
				if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v (%T), want usage error containing %q", err, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !spec.Persistent || spec.GroupShape != tt.shape {
				t.Errorf("persistent=%v shape=%q", spec.Persistent, spec.GroupShape)
			}
			if tt.want == nil {
				if spec.Hosts[99].Name != "x100" || spec.Hosts[0].Name != "x001" {
					t.Errorf("names %s..%s, want x001..x100", spec.Hosts[0].Name, spec.Hosts[99].Name)
				}
				return
			}
			var got []hostWant
			for _, h := range spec.Hosts {
				got = append(got, hostWant{h.Name, h.Group, h.RDMA})
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("hosts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	tests := [][]string{
		{"down"},
		{"down", "--name", "a", "--all"},
		{"down", "--name", "a", "--force"},
		{"up", "--groups", "a"},
		{"up", "--hosts", "2", "--groups", "a:1,b:2"},
		{"up", "--no-such-flag"},
		{"up", "extra"},
		{"up", "--state-root", "/tmp/x"},
	}
	for _, args := range tests {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"pipette-testbed"}, args...), &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr: %s", args, code, errOut.String())
		}
		if !strings.Contains(errOut.String(), "pipette-testbed:") {
			t.Errorf("%v: stderr %q has no error message", args, errOut.String())
		}
	}
}

// TestUpStatusDown drives the CLI as a user would, on a real test-bed.
func TestUpStatusDown(t *testing.T) {
	if err := testbed.CheckPrerequisites(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cli-test-%d", os.Getpid())
	t.Cleanup(func() { testbed.DownName("", name) })
	var out, errOut bytes.Buffer
	code := run([]string{"pipette-testbed", "up", "--name", name, "--groups", "ib:1:ib,eth:1", "--shape", "100mbit"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("up: exit %d: %s", code, errOut.String())
	}
	up := out.String()
	m := regexp.MustCompile(`ssh -F (\S+) node01 hostname`).FindStringSubmatch(up)
	if m == nil {
		t.Fatalf("up output has no ssh example:\n%s", up)
	}
	for _, want := range []string{"node01", "node02", "infiniband", "shaped to 100mbit", "pipette-launch probe --hostfile", "down --name " + name} {
		if !strings.Contains(up, want) {
			t.Errorf("up output lacks %q:\n%s", want, up)
		}
	}
	// the printed command works as printed, apart from known_hosts, which
	// ssh looks up through the password database
	cfg := m[1]
	kh := strings.TrimSuffix(cfg, "ssh_config") + "known_hosts"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang; a login on busy CI takes seconds
	defer cancel()
	got, err := exec.CommandContext(ctx, "ssh", "-F", cfg, "-o", "UserKnownHostsFile="+kh, "node02", "hostname").Output() // stdout: a login's shell start-up may write to stderr
	if err != nil || strings.TrimSpace(string(got)) != "node02" {
		t.Fatalf("ssh node02 hostname: %v: %s", err, got)
	}

	out.Reset()
	if code := run([]string{"pipette-testbed", "up", "--name", name}, &out, &errOut); code != 2 {
		t.Errorf("second up with the same name: exit %d, want 2", code)
	}

	out.Reset()
	if code := run([]string{"pipette-testbed", "status", "--hosts"}, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut.String())
	}
	if !regexp.MustCompile(name + `\s+2\s+2/2\s+up\s`).MatchString(out.String()) {
		t.Errorf("status does not show %s up with 2/2 sshd:\n%s", name, out.String())
	}

	infos, _ := testbed.List("")
	var netns []string
	for _, in := range infos {
		if in.Name == name {
			for _, h := range in.Hosts {
				netns = append(netns, h.Netns)
			}
		}
	}
	out.Reset()
	if code := run([]string{"pipette-testbed", "down", "--name", name}, &out, &errOut); code != 0 {
		t.Fatalf("down: exit %d: %s", code, errOut.String())
	}
	list, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range netns {
		if regexp.MustCompile(`(?m)^` + ns + `\b`).Match(list) {
			t.Errorf("netns %s left after down", ns)
		}
	}
	out.Reset()
	run([]string{"pipette-testbed", "status"}, &out, &errOut)
	if strings.Contains(out.String(), name) {
		t.Errorf("status still lists %s after down:\n%s", name, out.String())
	}
	if code := run([]string{"pipette-testbed", "down", "--name", name}, &out, &errOut); code != 1 {
		t.Errorf("down of a missing test-bed: exit %d, want 1", code)
	}
}

// TestHelperProcessUp is not a test: TestUpOutlivesItsProcess runs the test
// binary with it to get `pipette-testbed up` in a process of its own.
func TestHelperProcessUp(t *testing.T) {
	name := os.Getenv("PIPETTE_TESTBED_HELPER_UP")
	if name == "" {
		return
	}
	os.Exit(run([]string{"pipette-testbed", "up", "--name", name, "--hosts", "2"}, os.Stdout, os.Stderr))
}

// TestUpOutlivesItsProcess: the hosts made by `up` keep running after the
// command exits, and `down` from another process removes them.
func TestUpOutlivesItsProcess(t *testing.T) {
	if err := testbed.CheckPrerequisites(); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cli-exit-%d", os.Getpid())
	t.Cleanup(func() { testbed.DownName("", name) })
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcessUp$")
	cmd.Env = append(os.Environ(), "PIPETTE_TESTBED_HELPER_UP="+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("up in a child process: %v: %s", err, out)
	}
	infos, err := testbed.List("")
	if err != nil {
		t.Fatal(err)
	}
	var dir string
	for _, in := range infos {
		if in.Name == name {
			dir = in.Dir
			if !in.Persistent || in.SshdAlive != 2 {
				t.Fatalf("after up exited: persistent=%v sshd alive %d/2", in.Persistent, in.SshdAlive)
			}
		}
	}
	if dir == "" {
		t.Fatalf("test-bed %s not listed after up exited", name)
	}
	tb, err := testbed.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // bounds a hang; a login on busy CI takes seconds
	defer cancel()
	out, err := exec.CommandContext(ctx, "ssh", append(tb.SSHArgs("node02"), "hostname")...).Output()
	if err != nil || strings.TrimSpace(string(out)) != "node02" {
		t.Fatalf("ssh node02 after up exited: %v: %s", err, out)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"pipette-testbed", "down", "--dir", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("down --dir: exit %d: %s", code, stderr.String())
	}
	for _, h := range tb.Hosts {
		if _, err := os.Stat("/run/netns/" + h.Netns); err == nil {
			t.Errorf("netns %s left after down", h.Netns)
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", h.SshdPid)); err == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", h.SshdPid)); strings.Contains(string(st), "sshd") {
				t.Errorf("sshd %d of %s left after down", h.SshdPid, h.Name)
			}
		}
	}
}

// --host-shape sets single hosts' link rates.
func TestHostShapeFlag(t *testing.T) {
	spec, err := upOptions{Prefix: "n", Groups: "a:2,b:1", Shape: "50mbit", HostShape: "n01=400mbit, n03=250mbit"}.spec()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{spec.Hosts[0].Shape, spec.Hosts[1].Shape, spec.Hosts[2].Shape}
	if strings.Join(got, ",") != "400mbit,,250mbit" {
		t.Fatalf("host shapes %q", got)
	}
}
