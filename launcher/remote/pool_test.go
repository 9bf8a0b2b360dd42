package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestHostErrorsSortedAndFolded(t *testing.T) {
	refused := errors.New("connect: connection refused")
	h := &HostErrors{}
	h.Add("node10", refused)
	h.Add("node2", fmt.Errorf("connect: connection refused"))
	h.Add("gpu1", &HostKeyMismatchError{Host: "198.18.250.1", KnownHostsFile: "kh", Fingerprint: "ssh-ed25519 SHA256:x", Lines: []int{3}})
	h.Add("node1", refused)
	want := "2 distinct errors:\n" +
		"  gpu1: HOST KEY MISMATCH for 198.18.250.1: it presented ssh-ed25519 SHA256:x, which differs from kh line 3; possible man-in-the-middle; refusing to connect (if the host was reinstalled, remove the old key with `ssh-keygen -R 198.18.250.1 -f kh`)\n" +
		"  node1, node2, node10: connect: connection refused"
	if got := h.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var mm *HostKeyMismatchError
	if !errors.As(h, &mm) || !errors.Is(h, refused) {
		t.Errorf("errors.As/Is do not see the hosts' errors")
	}
	one := &HostErrors{}
	one.Add("a", refused)
	one.Add("b", refused)
	if got := one.Error(); got != "a, b: connect: connection refused" {
		t.Errorf("single group = %q", got)
	}
	if (&HostErrors{}).ErrorOrNil() != nil {
		t.Errorf("empty HostErrors is not nil")
	}
}

// TestPoolErrorsNameHostsByPort: two hosts behind one address that cannot
// be reached are named apart.
func TestPoolErrorsNameHostsByPort(t *testing.T) {
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close() // nothing listens there now: connection refused
	}
	p := NewPool(SSHOptions{KnownHostsFile: "/dev/null", ConnectTimeout: 5 * time.Second}, 0)
	defer p.Close()
	err := p.DialAll(context.Background(), []HostTarget{{Name: "127.0.0.1", Port: ports[0]}, {Name: "127.0.0.1", Port: ports[1]}})
	var he *HostErrors
	if !errors.As(err, &he) || len(he.Errs) != 2 {
		t.Fatalf("DialAll = %v, want both hosts' errors", err)
	}
	got := map[string]bool{he.Errs[0].Host: true, he.Errs[1].Host: true}
	for _, pt := range ports {
		if want := fmt.Sprintf("127.0.0.1:%d", pt); !got[want] {
			t.Errorf("errors name %v, want %s among them: %v", got, want, err)
		}
	}
}

func TestHostLessNatural(t *testing.T) {
	in := []string{"node10", "node9", "gpu-a2", "node09x", "gpu-a10", "node1"}
	h := &HostErrors{}
	for _, n := range in {
		h.Add(n, errors.New("x"))
	}
	if got := strings.Join(h.Hosts(), " "); got != "gpu-a2 gpu-a10 node1 node9 node09x node10" {
		t.Errorf("sorted = %s", got)
	}
}

func TestPoolEachBoundsConcurrency(t *testing.T) {
	p := NewPool(SSHOptions{}, 3)
	var now, peak atomic.Int32
	var targets []HostTarget
	for i := range 20 {
		targets = append(targets, HostTarget{Name: fmt.Sprintf("h%d", i)})
	}
	err := p.Each(context.Background(), targets, func(ctx context.Context, t HostTarget) error {
		n := now.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		now.Add(-1)
		if t.Name == "h7" || t.Name == "h13" {
			return errors.New("boom")
		}
		return nil
	})
	if peak.Load() > 3 || peak.Load() < 2 {
		t.Errorf("peak concurrency %d, want at most the fanout 3", peak.Load())
	}
	if err == nil || err.Error() != "h7, h13: boom" {
		t.Errorf("err = %v", err)
	}
}
