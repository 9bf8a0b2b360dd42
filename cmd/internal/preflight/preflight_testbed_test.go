package preflight

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdtest"
	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/cmd/internal/run"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// TestPreflightOnTestbed runs `pipette-launch preflight` on a real
// two-island test-bed (4 hosts, 2 ranks each, 200 Mbit/s between the
// islands): the planned TP 2 / PP 2 / DP 2 job's groups all pass with
// their bandwidth reported; then node3 and node4 (one island) lose the
// link between them, and the preflight fails within its timeout naming
// the pipeline link and the pair.
func TestPreflightOnTestbed(t *testing.T) {
	if out, err := exec.Command(cmdtest.BedPython, "-c", "import torch.distributed").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import torch.distributed (install the Debian package python3-torch): %v\n%s", cmdtest.BedPython, err, out)
	}
	spec := testbed.Spec{GroupShape: "200mbit"}
	for i, g := range []string{"isla", "isla", "islb", "islb"} {
		spec.Hosts = append(spec.Hosts, testbed.HostSpec{Name: fmt.Sprintf("node%d", i+1), Group: g})
	}
	tb := testbed.New(t, spec)
	dir, err := os.MkdirTemp("/var/tmp", "pipette-preflight-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cluster := filepath.Join(dir, "cluster.yaml")
	if err := os.WriteFile(cluster, []byte(bedCluster(tb)), 0o644); err != nil {
		t.Fatal(err)
	}
	const timeout = 10 * time.Second
	args := []string{"pipette-launch", "preflight", "--cluster", cluster,
		"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile,
		"--python", cmdtest.BedPython, "--workdir", dir, "--stop-grace", "3s", "--master-port", "29631",
		"--preflight-timeout", timeout.String(), "--no-check-script", "--framework", "megatron", "--use-all-gpus",
		"pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
		"--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "16", "--vocab-size", "1024",
		"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}

	t.Run("healthy", func(t *testing.T) {
		var out, errOut syncbuf.Buffer
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		t.Logf("stdout:\n%s", out.String())
		if code != 0 {
			t.Fatalf("exit %d, want 0\nstderr:\n%s", code, errOut.String())
		}
		for _, typ := range []string{"tp", "dp", "pp"} {
			row := regexp.MustCompile(`(?m)^` + typ + `\s+\S+\s+\S+\s+\S+\s+\S+\s+([0-9.]+)\s+[0-9.]+\s+ok$`)
			m := row.FindStringSubmatch(out.String())
			if m == nil {
				t.Errorf("no passing %s row with a measured bandwidth", typ)
				continue
			}
			if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
				t.Errorf("%s row measured %s GB/s", typ, m[1])
			}
		}
		if !strings.Contains(out.String(), "preflight passed") {
			t.Error("no verdict")
		}
		tb.AssertNothingLeft(t)
	})

	t.Run("cut pair", func(t *testing.T) {
		cut(t, tb, "node3", "node4")
		var out, errOut syncbuf.Buffer
		code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		msg := errOut.String()
		for _, w := range []string{"preflight failed: pp group", "node3,node4", "node3 <-> node4"} {
			if !strings.Contains(msg, w) {
				t.Errorf("stderr lacks %q", w)
			}
		}
		// Time only the failing operation (the rank's own clock): within
		// the timeout, with a margin for a busy machine.
		m := regexp.MustCompile(`after ([0-9.]+)s`).FindStringSubmatch(msg)
		if m == nil {
			t.Fatal("the failure does not say how long the group took")
		}
		if took, _ := strconv.ParseFloat(m[1], 64); took > timeout.Seconds()*2+5 {
			t.Errorf("the group failed after %.1fs, want within about the %s timeout", took, timeout)
		}
		tb.AssertNothingLeft(t)
	})
}

// bedCluster describes the test-bed's two islands (Ethernet only, 200
// Mbit/s between them), 2 "GPUs" per host for the planner.
func bedCluster(tb *testbed.Testbed) string {
	var b strings.Builder
	b.WriteString("clusters:\n")
	for i, name := range []string{"isla", "islb"} {
		fmt.Fprintf(&b, "  - name: %s\n    hosts:\n", name)
		for _, h := range tb.Hosts[2*i : 2*i+2] {
			fmt.Fprintf(&b, "      - {name: %s, address: %s}\n", h.Name, h.Addr)
		}
		b.WriteString("    gpus_per_host: 2\n    gpu: {model: L4}\n    nics:\n      - {type: ethernet, count: 1, rate_gbit_per_s: 10, netdevs: [eth0]}\n    host_memory_gib: 64\n    cpu_cores: 8\n")
	}
	b.WriteString("links:\n  - between: [isla, islb]\n    type: ethernet\n    bandwidth_gbit_per_s: 0.2\n")
	return b.String()
}

// cut drops all traffic between two hosts (a blackhole route each way),
// leaving their links to the launcher and the other hosts up.
func cut(t *testing.T, tb *testbed.Testbed, a, b string) {
	t.Helper()
	ha, _ := tb.Host(a)
	hb, _ := tb.Host(b)
	for _, p := range [][2]testbed.Host{{ha, hb}, {hb, ha}} {
		if out, err := tb.Exec(context.Background(), p[0].Name, "ip", "route", "add", "blackhole", p[1].Addr+"/32"); err != nil {
			t.Fatalf("cut %s -> %s: %v\n%s", p[0].Name, p[1].Name, err, out)
		}
	}
}

// runApp runs argv (argv[0] is the program) through a CLI of run and
// preflight, with stable job ids.
func runApp(argv []string, io *cmdutil.IOStreams) int {
	stable := func(o *run.Options) { o.NewJobID = cmdtest.JobID }
	r := run.NewCmd(io, stable)
	return cmdutil.Execute(cmdutil.NewApp(io, r, r, NewCmd(io, stable)), argv, io)
}
