package testbed

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Slurm test-bed runs Debian's real Slurm daemons on the test-bed hosts:
// one munged (in the root namespace, on a private socket and key), slurmctld
// on the first host, and one slurmd per host, each in its host's network,
// mount and UTS namespaces, so Slurm sees the host's name, address, private
// /tmp and /etc/hosts like a real node. Clients (srun, sbatch, salloc,
// scancel, sinfo) find the instance through SLURM_CONF (Testbed.SlurmEnv).
//
// What had to be turned off to run without systemd or a cgroup hierarchy of
// the host's own (docs in testbed/doc.go):
//   - process tracking by process group (proctrack/pgid) and no task
//     binding (task/none), no accounting (jobacct_gather/none,
//     accounting_storage/none): these need cgroups or a database;
//   - slurmd 22.05 still initialises its cgroup plugin at start, and `ip netns
//     exec` hides /sys/fs/cgroup behind a fresh sysfs: each slurmd runs in a
//     mount namespace of its own with the cgroup v1 controllers mounted again
//     under a tmpfs (the same kernel hierarchies, nothing new is created);
//   - SlurmUser and SlurmdUser are root (no slurm account in namespaces);
//   - SlurmdParameters=config_overrides: the node lines come from `slurmd -C`
//     on this machine, and a mismatch must not drain a node.

// slurmTools are the programs a Slurm test-bed runs, with their packages.
var slurmTools = []struct{ name, pkg string }{
	{"munged", "munge"},
	{"slurmctld", "slurmctld"},
	{"slurmd", "slurmd"},
	{"srun", "slurm-client"},
	{"sbatch", "slurm-client"},
	{"scancel", "slurm-client"},
	{"sinfo", "slurm-client"},
}

// checkSlurmPrerequisites names the package of the first missing program.
func checkSlurmPrerequisites() error {
	for _, t := range slurmTools {
		if _, err := exec.LookPath(t.name); err != nil {
			return fmt.Errorf("slurm test-bed needs %s: install the Debian package %s", t.name, t.pkg)
		}
	}
	return nil
}

// slurmReadyTimeout bounds the wait for every node to register as idle.
const slurmReadyTimeout = 45 * time.Second

func (b *builder) slurmDir() string { return filepath.Join(b.st.dir, "slurm") }

// SlurmConfFile is the instance's slurm.conf ("" unless built with Slurm).
func (tb *Testbed) SlurmConfFile() string {
	if !tb.st.Spec.Slurm {
		return ""
	}
	return filepath.Join(tb.Dir, "slurm", "slurm.conf")
}

// SlurmEnv is what a Slurm client needs in its environment to reach this
// instance's controller.
func (tb *Testbed) SlurmEnv() []string {
	return []string{"SLURM_CONF=" + tb.SlurmConfFile()}
}

// SlurmPartition is the instance's only partition (every host, the default).
const SlurmPartition = "tb"

// startSlurm starts munged, slurmctld and the slurmds and waits until every
// node is idle.
func (b *builder) startSlurm(ctx context.Context, hosts []Host) error {
	if err := checkSlurmPrerequisites(); err != nil {
		return err
	}
	d := b.slurmDir()
	for _, sub := range []string{"state", "log", "munge"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	for _, h := range hosts {
		if err := os.MkdirAll(filepath.Join(d, "spool", h.Name), 0o755); err != nil {
			return err
		}
	}
	sock, err := b.startMunge(ctx)
	if err != nil {
		return err
	}
	nodeHW, err := slurmNodeHardware(ctx)
	if err != nil {
		return err
	}
	conf := filepath.Join(d, "slurm.conf")
	if err := os.WriteFile(conf, []byte(slurmConf(b.st.Index, d, sock, nodeHW, hosts)), 0o644); err != nil {
		return err
	}
	// slurmd reads cgroup.conf from slurm.conf's directory.
	if err := os.WriteFile(filepath.Join(d, "cgroup.conf"), []byte("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"), 0o644); err != nil {
		return err
	}
	if err := b.startDaemon("slurmctld", hosts[0], filepath.Join(d, "log", "slurmctld.out"),
		"slurmctld", "-D", "-i", "-f", conf); err != nil {
		return err
	}
	for _, h := range hosts {
		if err := b.startDaemon("slurmd "+h.Name, h, filepath.Join(d, "log", "slurmd-"+h.Name+".out"),
			"unshare", "-m", "--propagation", "private", "sh", "-c", slurmdScript, "sh", h.Name, conf); err != nil {
			return err
		}
	}
	return waitSlurmIdle(ctx, conf, len(hosts), slurmReadyTimeout)
}

// slurmdScript mounts the cgroup v1 controllers slurmd's cgroup plugin
// looks for (see the note at the top), then becomes slurmd for node $1.
const slurmdScript = `set -e
mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
for c in freezer cpuset memory devices; do
  mkdir -p /sys/fs/cgroup/$c
  mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c
done
exec slurmd -D -N "$1" -f "$2"`

// startMunge starts a munged of the instance's own (key, socket) and
// returns its socket once it answers.
func (b *builder) startMunge(ctx context.Context) (string, error) {
	m := filepath.Join(b.slurmDir(), "munge")
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	keyFile := filepath.Join(m, "munge.key")
	if err := os.WriteFile(keyFile, key, 0o400); err != nil {
		return "", fmt.Errorf("munge key: %w", err)
	}
	sock := filepath.Join(m, "munge.socket")
	out, err := os.OpenFile(filepath.Join(m, "munged.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer out.Close()
	// --force: munged refuses root-owned state under a directory it did not
	// make itself otherwise; the key and socket are private to the instance.
	cmd := exec.Command("munged", "-F", "-f", "-S", sock, "--key-file="+keyFile,
		"--log-file="+filepath.Join(m, "munged.log"), "--pid-file="+filepath.Join(m, "munged.pid"),
		"--seed-file="+filepath.Join(m, "munged.seed"))
	if err := b.startRecorded("munged", cmd, out); err != nil {
		return "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := exec.CommandContext(ctx, "sh", "-c", `munge -n -S "$1" | unmunge -S "$1" >/dev/null`, "sh", sock).Run(); err == nil {
			return sock, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(m, "munged.out"))
			return "", fmt.Errorf("munged did not answer on %s within 10s: %s", sock, strings.TrimSpace(string(log)))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startDaemon starts argv in host's namespaces (those of its sshd), detached
// and recorded for Down.
func (b *builder) startDaemon(what string, h Host, logFile string, argv ...string) error {
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	args := append([]string{"-t", fmt.Sprint(h.SshdPid), "-m", "-u", "-n", "--"}, argv...)
	return b.startRecorded(what, exec.Command("nsenter", args...), out)
}

func (b *builder) startRecorded(what string, cmd *exec.Cmd, out *os.File) error {
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", what, err)
	}
	go cmd.Wait()
	st, err := processStartTime(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("%s exited at once (log: %s)", what, out.Name())
	}
	b.st.Daemons = append(b.st.Daemons, owner{Pid: cmd.Process.Pid, StartTime: st})
	return b.st.save()
}

// slurmNodeHardware is what `slurmd -C` reports for this machine (CPUs,
// sockets, cores, threads, memory): every test-bed host shares it.
func slurmNodeHardware(ctx context.Context) (string, error) {
	out, err := output(ctx, "slurmd", "-C")
	if err != nil {
		return "", fmt.Errorf("slurmd -C: %w", err)
	}
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "NodeName=") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if !strings.HasPrefix(f, "NodeName=") {
				keep = append(keep, f)
			}
		}
	}
	if len(keep) == 0 {
		return "", fmt.Errorf("slurmd -C printed no NodeName line: %q", out)
	}
	return strings.Join(keep, " "), nil
}

// slurmConf renders the instance's slurm.conf. Ports are Slurm's defaults:
// every daemon is alone in its host's network namespace.
func slurmConf(index int, dir, mungeSock, nodeHW string, hosts []Host) string {
	var b strings.Builder
	ctl := hosts[0]
	fmt.Fprintf(&b, `# pipette-testbed %d: generated; removed by pipette-testbed down
ClusterName=pltb%d
SlurmctldHost=%s(%s)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%s
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=%s
SlurmdSpoolDir=%s/spool/%%n
SlurmctldPidFile=%s/slurmctld.pid
SlurmdPidFile=%s/slurmd-%%n.pid
SlurmctldLogFile=%s/log/slurmctld.log
SlurmdLogFile=%s/log/slurmd-%%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/linear
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
`, index, index, ctl.Name, ctl.Addr, mungeSock, filepath.Join(dir, "state"), dir, dir, dir, dir, dir)
	for _, h := range hosts {
		fmt.Fprintf(&b, "NodeName=%s NodeAddr=%s %s State=UNKNOWN\n", h.Name, h.Addr, nodeHW)
	}
	fmt.Fprintf(&b, "PartitionName=%s Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n", SlurmPartition)
	return b.String()
}

// waitSlurmIdle polls sinfo until n nodes are idle.
func waitSlurmIdle(ctx context.Context, conf string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		cmd := exec.CommandContext(ctx, "sinfo", "-h", "-N", "-o", "%N %T")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		last = strings.TrimSpace(string(out))
		if err == nil && strings.Count(last, " idle") == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("slurm nodes not idle within %s (sinfo: %q; logs in %s)", timeout, last, filepath.Dir(conf))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// slurmClient runs a Slurm client program against the instance.
func (tb *Testbed) slurmClient(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), tb.SlurmEnv()...)
	cmd.Dir = tb.Dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// SlurmAlloc allocates nodes hosts without a shell (salloc --no-shell) and
// returns the environment a process inside that allocation has
// (SLURM_CONF, SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES). The
// allocation is cancelled when t ends.
func (tb *Testbed) SlurmAlloc(t testing.TB, nodes int) map[string]string {
	t.Helper()
	return tb.SlurmAllocWith(t, nodes)
}

// SlurmAllocWith is SlurmAlloc with more salloc flags (--no-kill: the
// allocation outlives a failed node, as an elastic job's must).
func (tb *Testbed) SlurmAllocWith(t testing.TB, nodes int, flags ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := tb.slurmClient(ctx, "salloc", append([]string{"--no-shell", "-N", fmt.Sprint(nodes), "-J", "pipette-test"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "salloc: Granted job allocation "); ok {
			id = strings.TrimSpace(rest)
		}
	}
	if id == "" {
		t.Fatalf("salloc: no job id in %q", out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := tb.slurmClient(ctx, "scancel", id); err != nil {
			t.Errorf("cancel allocation %s: %v", id, err)
		}
	})
	nl, err := tb.slurmClient(ctx, "squeue", "-h", "-j", id, "-o", "%N")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"SLURM_CONF": tb.SlurmConfFile(), "SLURM_JOB_ID": id, "SLURM_JOBID": id,
		"SLURM_JOB_NODELIST": nl, "SLURM_JOB_NUM_NODES": fmt.Sprint(nodes),
	}
}

// WaitSlurmStepsGone waits (up to limit) until no host runs a slurmstepd:
// srun returns when a step's tasks have ended, while each node's
// slurmstepd may still be tidying up for a moment. Tests call it before
// AssertNothingLeft, which then still fails for a step that never ends.
func (tb *Testbed) WaitSlurmStepsGone(limit time.Duration) {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		left, err := tb.Leftovers(0)
		if err != nil {
			return
		}
		busy := false
		for _, l := range left {
			if strings.Contains(l, "slurmstepd") {
				busy = true
			}
		}
		if !busy {
			return
		}
	}
}
