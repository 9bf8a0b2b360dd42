package run

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// forwardPort listens on a loopback port and forwards every connection to
// addr, as a container runtime publishes a container's sshd on one address
// of the machine (docker run -p PORT:22).
func forwardPort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// checkHostsBehindOneAddress: two test-bed hosts published on two ports of
// one address under one name (box:P1, box:P2) are two hosts of a real job:
// their own node ranks, output prefixes, log files and place in the
// failure summary.
func checkHostsBehindOneAddress(t *testing.T, tb *testbed.Testbed, dir string) {
	work := t.TempDir()
	keys := map[string]string{} // test-bed host -> "type key"
	f, err := os.Open(tb.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 3 {
			name, _, _ := strings.Cut(fs[0], ",")
			keys[name] = fs[1] + " " + fs[2]
		}
	}
	f.Close()
	var kh, hostfile strings.Builder
	ports := map[string]int{}
	for _, h := range tb.Hosts[:2] {
		p := forwardPort(t, net.JoinHostPort(h.Addr, "22"))
		ports[h.Name] = p
		fmt.Fprintf(&kh, "[box]:%d,[127.0.0.1]:%d %s\n", p, p, keys[h.Name])
		fmt.Fprintf(&hostfile, "box:%d slots=2\n", p)
	}
	files := map[string]string{
		"known_hosts": kh.String(),
		"hostfile":    hostfile.String(),
		"ssh_config":  fmt.Sprintf("Host box\n  HostName 127.0.0.1\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n", tb.KeyFile),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logDir := filepath.Join(work, "logs")
	args := []string{"pipette-launch", "run", "--hostfile", filepath.Join(work, "hostfile"), "--nproc-per-node", "2", "--framework", "torch",
		"--ssh-config", filepath.Join(work, "ssh_config"), "--known-hosts", filepath.Join(work, "known_hosts"),
		"--python", cmdtest.BedPython, "--workdir", dir, "--stop-grace", "3s", "--master-port", "29613", "--log-dir", logDir,
		filepath.Join(dir, "torch_allreduce.py"), "--expect-world", "4", "--timeout", "60", "--fail-rank", "3", "--exit-code", "3"}
	var out, errOut syncbuf.Buffer
	code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != 1 {
		t.Fatalf("exit %d, want 1 (rank 3 fails on purpose)\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	p1, p2 := ports[tb.Hosts[0].Name], ports[tb.Hosts[1].Name]
	for _, want := range []string{
		fmt.Sprintf("box:%d:0: ALLREDUCE OK rank=0 sum=10", p1), fmt.Sprintf("box:%d:2: ALLREDUCE OK rank=2 sum=10", p2),
		fmt.Sprintf("box:%d:1: ENV RANK=1 LOCAL_RANK=1", p1), fmt.Sprintf("box:%d:3: ENV RANK=3 LOCAL_RANK=1", p2),
		"HOST=" + tb.Hosts[0].Name, "HOST=" + tb.Hosts[1].Name,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q\n%s", want, out.String())
		}
	}
	if want := fmt.Sprintf("  host      : box:%d\n", p2); !strings.Contains(errOut.String(), want) {
		t.Errorf("the summary does not name box:%d:\n%s", p2, errOut.String())
	}
	for _, lf := range []string{fmt.Sprintf("box_%d.0.log", p1), fmt.Sprintf("box_%d.3.log", p2)} {
		b, err := os.ReadFile(filepath.Join(logDir, lf))
		if err != nil || !strings.Contains(string(b), "ALLREDUCE OK") {
			t.Errorf("log %s: %v\n%s", lf, err, b)
		}
	}
	tb.AssertNothingLeft(t)
}
