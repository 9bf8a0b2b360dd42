package run

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// TestDryRunShowsTheCachedLaunchProbe: a launch caches its quick probe
// (rank 0's address, each host's interface); --dry-run and --output-dir of
// the same hosts then show MASTER_ADDR and GLOO/NCCL_SOCKET_IFNAME as the
// launch renders them, without connecting. Other hosts, another SSH user,
// or a probe older than --probe-max-age are misses, said in one line;
// --reprobe probes now.
func TestDryRunShowsTheCachedLaunchProbe(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "train.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmdtest.CleanEnv(t)
	t.Setenv("HOME", t.TempDir()) // one cache for every run below
	t.Chdir(dir)
	f := &fakes{}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := runAppWith(f.adjust, append([]string{"pipette-launch"}, args...), &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		return code, out.String(), errOut.String()
	}
	probes, iface := 0, "ens"
	f.probe = func(_ context.Context, targets []remote.HostTarget, rank0 int, _ string, _ *Options) (*launchprobe.Result, *remote.Pool, error) {
		probes++
		lp := &launchprobe.Result{MasterAddr: "10.1.2.3", ProbedAt: time.Now().UTC()}
		for i, tg := range targets {
			lp.Hosts = append(lp.Hosts, launchprobe.HostRoute{Target: tg.String(), Ifname: iface + string(rune('1'+i))})
		}
		return lp, nil, nil
	}
	f.launch = func(context.Context, *job.Job, *Options) error { return nil }
	hosts := []string{"--hosts", "n1,n2", "--python", "/usr/bin/python3", "--nproc-per-node", "2"}

	// Nothing cached yet: the dry run says so and sets no interface.
	code, out, errOut := run(append(append([]string{"--dry-run"}, hosts...), "train.py")...)
	if code != 0 || !strings.Contains(out, "# where ranks meet: no launch probe of these hosts younger than 24h0m0s is cached") || strings.Contains(out, "SOCKET_IFNAME=") || probes != 0 {
		t.Fatalf("before any launch: exit %d, %d probes\n%s%s", code, probes, out, errOut)
	}
	if code, _, errOut := run(append(hosts, "train.py")...); code != 0 || probes != 1 {
		t.Fatalf("launch: exit %d, %d probes: %s", code, probes, errOut)
	}
	code, out, errOut = run(append(append([]string{"--dry-run"}, hosts...), "train.py")...)
	for _, want := range []string{"# where ranks meet: from the launch probe of ", "MASTER_ADDR 10.1.2.3; interfaces n1 ens1, n2 ens2",
		"MASTER_ADDR=10.1.2.3", "GLOO_SOCKET_IFNAME=ens1", "NCCL_SOCKET_IFNAME==ens2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("dry run after a launch: exit %d, output lacks %q\n%s%s", code, want, out, errOut)
		}
	}
	outDir := filepath.Join(t.TempDir(), "scripts")
	if code, out, errOut := run(append(append([]string{"--output-dir", outDir}, hosts...), "train.py")...); code != 0 || !strings.Contains(out, "from the launch probe of") {
		t.Errorf("--output-dir: exit %d\n%s%s", code, out, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(outDir, "n2.sh")); !strings.Contains(string(b), "GLOO_SOCKET_IFNAME=ens2") || !strings.Contains(string(b), "MASTER_ADDR=10.1.2.3") {
		t.Errorf("n2.sh lacks the probed interface and address:\n%s", b)
	}
	for name, args := range map[string][]string{
		"other hosts":      {"--dry-run", "--hosts", "n1,n3", "--python", "/usr/bin/python3", "--nproc-per-node", "2", "train.py"},
		"other user":       {"--dry-run", "--hosts", "bob@n1,bob@n2", "--python", "/usr/bin/python3", "--nproc-per-node", "2", "train.py"},
		"other port":       {"--dry-run", "--hosts", "n1:2222,n2:2222", "--python", "/usr/bin/python3", "--nproc-per-node", "2", "train.py"},
		"too old":          append(append([]string{"--dry-run", "--probe-max-age", "1ns"}, hosts...), "train.py"),
		"rank 0 elsewhere": {"--dry-run", "--hosts", "n2,n1", "--python", "/usr/bin/python3", "--nproc-per-node", "2", "train.py"},
	} {
		code, out, errOut := run(args...)
		if code != 0 || !strings.Contains(out, "# where ranks meet: no launch probe") || strings.Contains(out, "SOCKET_IFNAME=") {
			t.Errorf("%s: want a miss: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	// --reprobe probes now and refreshes the cache.
	iface = "ib"
	code, out, errOut = run(append(append([]string{"--dry-run", "--reprobe"}, hosts...), "train.py")...)
	if code != 0 || probes != 2 || !strings.Contains(out, "GLOO_SOCKET_IFNAME=ib1") {
		t.Errorf("--reprobe: exit %d, %d probes\n%s%s", code, probes, out, errOut)
	}
	if _, out, _ = run(append(append([]string{"--dry-run"}, hosts...), "train.py")...); !strings.Contains(out, "NCCL_SOCKET_IFNAME==ib2") || probes != 2 {
		t.Errorf("after --reprobe the cache holds the new probe: %d probes\n%s", probes, out)
	}
}
