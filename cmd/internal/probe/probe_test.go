package probe

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/launcher/probe/measure"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/testbed"
)

func probeExit(err error) int {
	var ec cli.ExitCoder
	if errors.As(probeExitStatus(err), &ec) {
		return ec.ExitCode()
	}
	return 0
}

func TestProbeInputErrorsExit2(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no hosts", Options{Output: "-", Getenv: noEnv}, "no hosts"},
		{"both sources", Options{Hosts: "a", Hostfile: "f", Output: "-"}, "not both"},
		{"bad group", Options{Hosts: "a", Group: "rack", Output: "-"}, "--group"},
		{"bad hostlist", Options{Hosts: "node[3-1]", Output: "-"}, "node[3-1]"},
		{"missing hostfile", Options{Hostfile: "/nonexistent/hosts", Output: "-"}, "/nonexistent/hosts"},
		// Issue 31: NaN passed both comparisons; an absurd slot rate went
		// into the cluster file.
		{"nan compute seconds", Options{Hosts: "a", Output: "-", ComputeSeconds: math.NaN()}, "--measure-compute-seconds NaN: want 0-300"},
		{"absurd cpu tflops", Options{Hosts: "a", Output: "-", CPUSlotTFLOPS: 1e300}, "--cpu-tflops 1e+300: want a number from 0.0001 to 100000 TFLOP/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			tc.opts.IO = &cmdutil.IOStreams{Out: &out, ErrOut: &errOut}
			err := Run(&tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want mention of %q", err, tc.want)
			}
			if code := probeExit(err); code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
		})
	}
}

// A real probe of three test-bed hosts (InfiniBand, RoCE, plain Ethernet)
// over SSH, with --measure; a second run reuses the cached matrix and
// --reprobe measures again.
func TestProbeCommandOnTestbed(t *testing.T) {
	tb := testbed.New(t, testbed.Spec{GroupShape: "100mbit", Hosts: []testbed.HostSpec{
		{Name: "ib1", Group: "a", RDMA: "infiniband", RateGbitPerS: 200},
		{Name: "roce1", Group: "a", RDMA: "roce", RateGbitPerS: 100},
		{Name: "eth1", Group: "b"},
	}})
	dir := t.TempDir()
	out := filepath.Join(dir, "cluster.yaml")
	run := func(reprobe bool) (*cluster.File, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		opts := &Options{
			IO:    &cmdutil.IOStreams{Out: &stdout, ErrOut: &stderr},
			Hosts: "ib1,roce1,eth1",
			SSH: remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile,
				IdentityFiles: []string{tb.KeyFile}},
			NProcPerNode: 2, Measure: true, MeasureSeconds: 1, MeasurePort: 5302,
			Reprobe: reprobe, CacheDir: filepath.Join(dir, "cache"), Output: out,
		}
		if err := Run(opts); err != nil {
			t.Fatalf("probe: %v\nstderr:\n%s", err, stderr.String())
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		f, err := cluster.Parse(data)
		if err != nil {
			t.Fatalf("written cluster file does not parse: %v\n%s", err, data)
		}
		if !strings.Contains(stdout.String(), "wrote "+out) {
			t.Errorf("stdout lacks the summary:\n%s", stdout.String())
		}
		return f, stderr.String()
	}

	first, stderr := run(false)
	t.Logf("stderr:\n%s", stderr)
	types := map[string]cluster.NICType{}
	for _, c := range first.Clusters {
		for _, h := range c.Hosts {
			types[h.Name] = c.NICs[0].Type
			if c.GPUsPerHost != 2 || h.Address == "" {
				t.Errorf("%s: %d slots, address %q", h.Name, c.GPUsPerHost, h.Address)
			}
		}
	}
	want := map[string]cluster.NICType{"ib1": cluster.NICInfiniBand, "roce1": cluster.NICRoCE, "eth1": cluster.NICEthernet}
	if !reflect.DeepEqual(types, want) {
		t.Errorf("first NIC type per host %v, want %v", types, want)
	}
	m := first.Measured
	if m == nil || !reflect.DeepEqual(m.Hosts, []string{"ib1", "roce1", "eth1"}) {
		t.Fatalf("measured %+v", m)
	}
	// ib1 and roce1 share group a; eth1 is behind the 100 Mbit/s link.
	if m.GbitPerS[0][1] < 1 || m.GbitPerS[0][2] > 0.11 || m.GbitPerS[2][1] > 0.11 {
		t.Errorf("matrix does not show the slow links:\n%s", measure.MatrixTable(m))
	}

	cached, stderr := run(false)
	if !strings.Contains(stderr, "using the measurement of") || !reflect.DeepEqual(cached.Measured.GbitPerS, m.GbitPerS) ||
		!cached.Measured.MeasuredAt.Equal(m.MeasuredAt) {
		t.Errorf("second run did not reuse the cache: stderr %q", stderr)
	}
	again, stderr := run(true)
	if strings.Contains(stderr, "using the measurement of") || !again.Measured.MeasuredAt.After(m.MeasuredAt) {
		t.Errorf("--reprobe reused the cache (at %v, first %v)", again.Measured.MeasuredAt, m.MeasuredAt)
	}

	// A host that refuses connections (a closed port on loopback): the
	// error names it, the exit status is 1, and no file is written.
	bad := filepath.Join(dir, "bad.yaml")
	var stdout, errOut bytes.Buffer
	err := Run(&Options{
		IO:    &cmdutil.IOStreams{Out: &stdout, ErrOut: &errOut},
		Hosts: "ib1,root@127.0.0.1:1",
		SSH: remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile,
			IdentityFiles: []string{tb.KeyFile}},
		NProcPerNode: 1, Output: bad,
	})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "ib1") || probeExit(err) != 1 {
		t.Errorf("unreachable host: err = %v (exit %d), want it named alone, exit 1", err, probeExit(err))
	}
	if _, statErr := os.Stat(bad); statErr == nil {
		t.Error("a cluster file was written although a host failed")
	}
}
