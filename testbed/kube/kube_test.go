package kube

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Mode
		ok   bool
	}{{"kwok", Kwok, true}, {"kubelet", Kubelet, true}, {"both", Both, true}, {"kind", "", false}, {"", "", false}} {
		got, err := ParseMode(c.in)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("ParseMode(%q) = %q, %v", c.in, got, err)
		}
	}
}

// TestKwokStackUp: the stack starts, reports the pinned version, has the
// JobSet and Trainer APIs and two Ready fake GPU nodes, and a second Up
// while it runs is refused with a clear error.
func TestKwokStackUp(t *testing.T) {
	start := time.Now()
	s := New(t, Kwok)
	t.Logf("kwok stack up in %s", time.Since(start).Round(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.Kubectl(ctx, nil, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"gitVersion": "`+Kubernetes+`"`) {
		t.Errorf("server version is not %s:\n%s", Kubernetes, out)
	}
	out, err = s.Kubectl(ctx, nil, "get", "nodes", "-l", "type=kwok", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.allocatable.nvidia\.com/gpu} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "kwok-node-0 8 True\nkwok-node-1 8 True" {
		t.Errorf("kwok nodes:\n%s", got)
	}
	out, err = s.Kubectl(ctx, nil, "api-resources", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"jobsets.jobset.x-k8s.io", "trainjobs.trainer.kubeflow.org", "clustertrainingruntimes.trainer.kubeflow.org"} {
		if !strings.Contains(string(out), r) {
			t.Errorf("API %s missing", r)
		}
	}
	if _, err := Up(ctx, Options{Mode: Kwok, Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "another kubernetes stack") {
		t.Errorf("second Up: err = %v, want a refusal naming the running stack", err)
	}
	// What `pipette-testbed down --kubernetes` does after go test's
	// -timeout killed a test past its Cleanup: it finds the test's stack
	// by its state dir and stops it, freeing the ports the next Up needs.
	stopped, err := DownAll(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(stopped, s.Dir) {
		t.Errorf("DownAll stopped %q, not this test's stack in %s", stopped, s.Dir)
	}
	if err := portsFree(); err != nil {
		t.Errorf("after DownAll: %v", err)
	}
}

// TestStateDirsIn: the default dir and each test's count when up.sh's PID
// files are there, whatever the test's name; a dir without them is not a
// stack left running.
func TestStateDirsIn(t *testing.T) {
	root := t.TempDir()
	def, tests := filepath.Join(root, "kubernetes"), filepath.Join(root, "kubernetes-test")
	for d, pid := range map[string]bool{def: true, filepath.Join(tests, "TestA"): true, filepath.Join(tests, "TestB_sub"): false} {
		if err := os.MkdirAll(filepath.Join(d, "run"), 0o700); err != nil {
			t.Fatal(err)
		}
		if pid {
			if err := os.WriteFile(filepath.Join(d, "run", "etcd.pid"), []byte("1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := stateDirsIn(def, tests)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{def, filepath.Join(tests, "TestA")}; !slices.Equal(got, want) {
		t.Errorf("stateDirsIn = %q, want %q", got, want)
	}
	if got, err := stateDirsIn(filepath.Join(root, "none"), filepath.Join(root, "none-test")); err != nil || len(got) != 0 {
		t.Errorf("no state dirs: %q, %v", got, err)
	}
}

// TestUpRefusesPortsTaken: with the lock free but a stack port taken (the
// daemons of a run that was killed outlive its lock), Up's check names the
// port and what to run, instead of up.sh taking the other daemons for its
// own. The test holds the stack lock while it listens, so no stack of
// another package starts meanwhile.
func TestUpRefusesPortsTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	lock, err := acquire(ctx, 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := portsFree(); err != nil {
		t.Fatalf("ports taken before the test took one: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:10250")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = portsFree()
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:10250 is in use") || !strings.Contains(err.Error(), "pipette-testbed down --kubernetes") {
		t.Errorf("portsFree with 10250 taken = %v", err)
	}
}
