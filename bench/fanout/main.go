// Command fanout compares starting and finishing a trivial command on many
// test-bed hosts with pipette-launch's SSH pool and Launch against
// `pdsh -R ssh`. It builds its own test-bed (needs root) and removes it.
//
//	go run ./bench/fanout -hosts 16 -n 10
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/stats"
	"github.com/pipette-launch/pipette-launch/launcher/launch"
	"github.com/pipette-launch/pipette-launch/launcher/probe/launchprobe"
	"github.com/pipette-launch/pipette-launch/launcher/remote"
	"github.com/pipette-launch/pipette-launch/templates/job"
	"github.com/pipette-launch/pipette-launch/testbed"
)

func main() {
	hosts := flag.Int("hosts", 16, "test-bed hosts")
	n := flag.Int("n", 10, "repetitions of each variant")
	cmd := flag.String("cmd", "hostname", "the trivial command")
	refCLI := flag.String("ref-cli", "", "a second pipette-launch binary (say, an older commit's) whose run is timed beside this tree's")
	flag.Parse()
	if err := run(*hosts, *n, *cmd, *refCLI); err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		os.Exit(1)
	}
}

func run(nHosts, n int, command, refCLI string) error {
	if _, err := exec.LookPath("pdsh"); err != nil {
		return fmt.Errorf("pdsh not found: install the Debian package pdsh")
	}
	spec := testbed.Spec{Name: "bench-fanout"}
	for i := 1; i <= nHosts; i++ {
		spec.Hosts = append(spec.Hosts, testbed.HostSpec{Name: fmt.Sprintf("node%d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tb, err := testbed.Up(ctx, spec)
	if err != nil {
		return err
	}
	defer tb.Down()

	sshOpts := remote.SSHOptions{SSHConfigFile: tb.SSHConfigFile, KnownHostsFile: tb.KnownHostsFile,
		IdentityFiles: []string{tb.KeyFile}}
	var targets []remote.HostTarget
	for _, h := range tb.Names() {
		targets = append(targets, remote.HostTarget{Name: h})
	}

	cli, err := buildCLI()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(cli))
	type variant struct {
		name string
		fn   func() error
	}
	variants := []variant{
		{"pipette pool (dial+run+close)", func() error { return poolRun(ctx, targets, sshOpts, command) }},
		{"pipette Launch (dial+send agent+start+supervise)", func() error { return launchRun(ctx, tb, sshOpts, command) }},
		{"pipette launch probe (dial+probe+close)", func() error { return launchProbeRun(ctx, targets, sshOpts) }},
		{"pipette launch probe, then Launch (one pool)", func() error { return probeThenLaunchRun(ctx, tb, targets, sshOpts, command) }},
		{"pipette-launch run (CLI binary: start+finish)", func() error { return cliRun(ctx, cli, tb, command) }},
		{"pipette-launch probe+run (CLI binary)", func() error { return cliProbeRun(ctx, cli, tb, command) }},
		{"pdsh -R ssh", func() error { return pdshRun(ctx, tb, command) }},
	}
	if refCLI != "" { // before pdsh, which stays last
		ref := variant{"pipette-launch run (reference CLI binary)", func() error { return cliRun(ctx, refCLI, tb, command) }}
		pdsh := variants[len(variants)-1]
		variants = append(variants[:len(variants)-1], ref, pdsh)
	}
	times := make([][]time.Duration, len(variants))
	for rep := 0; rep < n; rep++ {
		for i, v := range variants { // interleaved, so drift hits all alike
			start := time.Now()
			if err := v.fn(); err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			times[i] = append(times[i], time.Since(start))
		}
	}
	fmt.Printf("%d hosts, %q, %d repetitions each (interleaved)\n", nHosts, command, n)
	meds := make([]time.Duration, len(variants))
	for i, v := range variants {
		meds[i] = stats.Median(times[i])
		fmt.Printf("  %-52s median %7.1f ms  (min %.1f, max %.1f)\n", v.name, ms(meds[i]), ms(minD(times[i])), ms(maxD(times[i])))
	}
	pdsh := meds[len(meds)-1]
	for i, v := range variants[:len(variants)-1] {
		fmt.Printf("  ratio %-52s / pdsh = %.2f\n", v.name, float64(meds[i])/float64(pdsh))
	}
	return nil
}

// launchProbeRun is the launch probe `run` does before rendering (rank 0's
// address, every host's interface towards it), on a fresh pool: its cost
// on its own, dial included.
func launchProbeRun(ctx context.Context, targets []remote.HostTarget, opts remote.SSHOptions) error {
	p := remote.NewPool(opts, 64)
	defer p.Close()
	lp, err := launchprobe.Hosts(ctx, p, targets, 0, "")
	if err == nil && lp.MasterAddr == "" {
		err = fmt.Errorf("launch probe: no MASTER_ADDR")
	}
	return err
}

// probeThenLaunchRun is what `run` does over SSH, in-process: the launch
// probe, then Launch on the probe's pool, where each host's probe session
// stands by for its agent. Its excess over launchRun is what the launch
// probe costs a launch.
func probeThenLaunchRun(ctx context.Context, tb *testbed.Testbed, targets []remote.HostTarget, opts remote.SSHOptions, command string) error {
	p := remote.NewPool(opts, 64)
	defer p.Close()
	lp, err := launchprobe.Hosts(ctx, p, targets, 0, "")
	if err != nil {
		return err
	}
	if lp.MasterAddr == "" {
		return fmt.Errorf("launch probe: no MASTER_ADDR")
	}
	return launchOn(ctx, tb, opts, p, command)
}

func poolRun(ctx context.Context, targets []remote.HostTarget, opts remote.SSHOptions, command string) error {
	p := remote.NewPool(opts, 64)
	defer p.Close()
	if err := p.DialAll(ctx, targets); err != nil {
		return err
	}
	return p.Each(ctx, targets, func(ctx context.Context, t remote.HostTarget) error {
		out, _, err := p.Conn(t).Run(ctx, command)
		if err == nil && command == "hostname" && strings.TrimSpace(string(out)) != t.Name {
			err = fmt.Errorf("hostname = %q", out)
		}
		return err
	})
}

func launchRun(ctx context.Context, tb *testbed.Testbed, opts remote.SSHOptions, command string) error {
	return launchOn(ctx, tb, opts, nil, command)
}

// launchOn is Launch of command on every host, over pool (nil: its own).
func launchOn(ctx context.Context, tb *testbed.Testbed, opts remote.SSHOptions, pool *remote.Pool, command string) error {
	j := job.Job{Name: "bench", WorkDir: "/tmp/pipette-bench"}
	for i, h := range tb.Names() {
		j.Hosts = append(j.Hosts, job.HostJob{Name: h, NodeRank: i,
			Ranks: []job.RankJob{{Rank: i, Argv: []string{"/bin/sh", "-c", command}}}})
	}
	var out strings.Builder
	err := launch.Launch(ctx, j, launch.Options{SSH: opts, Pool: pool, Out: &out})
	if err == nil && command == "hostname" {
		for i, h := range tb.Names() {
			if !strings.Contains(out.String(), fmt.Sprintf("%s:%d: %s\n", h, i, h)) {
				return fmt.Errorf("no output from %s:\n%s", h, out.String())
			}
		}
	}
	return err
}

func pdshRun(ctx context.Context, tb *testbed.Testbed, command string) error {
	c := exec.CommandContext(ctx, "pdsh", "-R", "ssh", "-f", "64", "-S", "-w", strings.Join(tb.Names(), ","), command)
	// OpenSSH finds ~/.ssh through the password database: pass everything.
	c.Env = append(os.Environ(), "PDSH_SSH_ARGS_APPEND=-F "+tb.SSHConfigFile+" -o UserKnownHostsFile="+tb.KnownHostsFile+
		" -o IdentityFile="+tb.KeyFile+" -o StrictHostKeyChecking=yes -o BatchMode=yes")
	// Stdout only: the hosts' shell start-up files may print noise on stderr.
	out, err := c.Output()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	if command == "hostname" {
		for _, h := range tb.Names() {
			if !strings.Contains(string(out), h+": "+h+"\n") {
				return fmt.Errorf("no output from %s:\n%s", h, out)
			}
		}
	}
	return nil
}

func minD(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = min(m, x)
	}
	return m
}
func maxD(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = max(m, x)
	}
	return m
}
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// buildCLI builds the pipette-launch binary, so the CLI variants measure
// what a user runs (not `go run`'s compile).
func buildCLI() (string, error) {
	dir, err := os.MkdirTemp("", "fanout-cli-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "pipette-launch")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/pipette-launch").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

func cliSSHFlags(tb *testbed.Testbed) []string {
	return []string{"--ssh-config", tb.SSHConfigFile, "--known-hosts", tb.KnownHostsFile, "--identity", tb.KeyFile}
}

// cliRun is `pipette-launch run --hostfile H --no-python CMD`: one rank per
// host, started, streamed and reaped.
func cliRun(ctx context.Context, bin string, tb *testbed.Testbed, command string) error {
	args := append([]string{"run", "--hostfile", tb.HostsFile, "--no-python"}, cliSSHFlags(tb)...)
	out, err := exec.CommandContext(ctx, bin, append(args, command)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}

// cliProbeRun probes every host (GPUs, NICs, memory, CPUs) and then runs
// the command, the whole first contact a user makes with a cluster.
func cliProbeRun(ctx context.Context, bin string, tb *testbed.Testbed, command string) error {
	f, err := os.CreateTemp("", "fanout-cluster-*.yaml")
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(f.Name())
	args := append([]string{"probe", "--hostfile", tb.HostsFile, "--nproc-per-node", "1", "-o", f.Name()}, cliSSHFlags(tb)...)
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("probe: %v\n%s", err, out)
	}
	return cliRun(ctx, bin, tb, command)
}
