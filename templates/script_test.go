package templates

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/planner/cluster"
	"github.com/pipette-launch/pipette-launch/planner/parallel"
	"github.com/pipette-launch/pipette-launch/planner/search"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// helperOutEnv makes the test binary act as the training program: it writes
// its argv and environment, NUL-separated, to files named by rank.
const helperOutEnv = "PIPETTE_TEST_HELPER_OUT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperOutEnv); dir != "" {
		os.Exit(helperMain(dir))
	}
	os.Exit(m.Run())
}

func helperMain(dir string) int {
	rank := os.Getenv("RANK")
	write := func(kind string, items []string) error {
		var b bytes.Buffer
		for _, s := range items {
			b.WriteString(s)
			b.WriteByte(0)
		}
		return os.WriteFile(filepath.Join(dir, kind+"."+rank), b.Bytes(), 0o644)
	}
	if err := write("argv", os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := os.WriteFile(filepath.Join(dir, "pid."+rank), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return 3
	}
	if os.Getenv("HELPER_READ_STDIN") != "" {
		in, _ := io.ReadAll(os.Stdin) // a rank that reads stdin
		if err := os.WriteFile(filepath.Join(dir, "stdin."+rank), in, 0o644); err != nil {
			return 3
		}
	}
	if err := write("env", os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if os.Getenv("HELPER_IGNORE_TERM") != "" {
		signal.Ignore(syscall.SIGTERM) // a rank that shuts down slowly
	}
	if code := os.Getenv("HELPER_EXIT_RANK_" + rank); code != "" {
		// Fail only once rank 0 runs, so there is a rank to stop.
		for range 1000 {
			if _, err := os.Stat(filepath.Join(dir, "env.0")); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		var c, ms int
		fmt.Sscan(code, &c)
		fmt.Sscan(os.Getenv("HELPER_DELAY_MS_"+rank), &ms)
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return c
	}
	if os.Getenv("HELPER_SLEEP") != "" {
		time.Sleep(time.Hour) // stands for a rank that runs until it is stopped
	}
	return 0
}

// nastyWords hold every character class a shell could misread.
var nastyWords = []string{
	"plain", "with space", "it's", `"double"`, "$HOME", "${PATH}", "`id`", "$(id)", "a;b", "*", "?", "[a]",
	"new\nline", "tab\there", "ünïcødé ✓", `back\slash`, "'", "''", "-n", "--flag=a b", "!bang", "~", "a=b c",
	"&", "|", "> out", "#comment", "",
}

// renderLocal renders a one-host torch job whose program is this test binary.
func renderLocal(t *testing.T, args []string, env []string) *job.Job {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := newTestCluster(islandDef{name: "local", hosts: []string{"localhost"}, gpus: 2, gpu: "cpu", nics: ethNICs(10)})
	p := &search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 2, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 2}}
	p.Placement = placeInOrder(c, []int{0}, 2, identity)
	job, err := Render(p, c, Options{Script: self, NoPython: true, Args: args, Env: env, Name: "quote test"})
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return job
}

// runScript executes a rendered host script with sh and extra variables.
func runScript(t *testing.T, script string, extraEnv ...string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "host0.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", path)
	cmd.Env = append(os.Environ(), extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		}
		t.Fatalf("run launch script: %v", err)
	}
	return 0, stderr.String()
}

func readNUL(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the rank did not write its output: %v", err)
	}
	parts := strings.Split(string(b), "\x00")
	return parts[:len(parts)-1]
}

// TestLaunchScriptDeliversBytesExactly executes the rendered script: every
// argument and forwarded variable must arrive byte-for-byte, and the
// rendered per-rank environment must be set as rendered.
func TestLaunchScriptDeliversBytesExactly(t *testing.T) {
	var env []string
	for i, w := range nastyWords {
		env = append(env, fmt.Sprintf("NCCL_TEST_%d=%s", i, w))
	}
	job := renderLocal(t, nastyWords, env)
	out := t.TempDir()
	code, stderr := runScript(t, job.Hosts[0].Script, helperOutEnv+"="+out)
	if code != 0 {
		t.Fatalf("launch script exited %d: %s", code, stderr)
	}
	for _, r := range job.Hosts[0].Ranks {
		argv := readNUL(t, filepath.Join(out, fmt.Sprintf("argv.%d", r.Rank)))
		if len(argv) != len(nastyWords) {
			t.Fatalf("rank %d got %d args, want %d: %q", r.Rank, len(argv), len(nastyWords), argv)
		}
		for i := range argv {
			if argv[i] != nastyWords[i] {
				t.Errorf("rank %d arg %d = %q, want %q", r.Rank, i, argv[i], nastyWords[i])
			}
		}
		got := map[string]string{}
		for _, kv := range readNUL(t, filepath.Join(out, fmt.Sprintf("env.%d", r.Rank))) {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		for _, e := range r.Env {
			if got[e.Name] != e.Value {
				t.Errorf("rank %d env %s = %q, want %q", r.Rank, e.Name, got[e.Name], e.Value)
			}
		}
		for i, w := range nastyWords {
			if v := got[fmt.Sprintf("NCCL_TEST_%d", i)]; v != w {
				t.Errorf("rank %d NCCL_TEST_%d = %q, want %q", r.Rank, i, v, w)
			}
		}
		if got["TORCHELASTIC_RUN_ID"] != "quote test" || got["LOCAL_RANK"] != fmt.Sprint(r.LocalRank) {
			t.Errorf("rank %d: run id %q local rank %q", r.Rank, got["TORCHELASTIC_RUN_ID"], got["LOCAL_RANK"])
		}
	}
}

// TestLaunchScriptStopsOthersWhenOneFails: rank 1 exits 7 while rank 0 runs
// until stopped; the script must stop rank 0 and exit with 7.
func TestLaunchScriptStopsOthersWhenOneFails(t *testing.T) {
	job := renderLocal(t, nil, nil)
	out := t.TempDir()
	code, stderr := runScript(t, job.Hosts[0].Script, helperOutEnv+"="+out, "HELPER_SLEEP=1",
		"HELPER_EXIT_RANK_1=7", "PIPETTE_STOP_GRACE_S=5", "PIPETTE_RESTART_COUNT=2")
	if code != 7 {
		t.Fatalf("launch script exited %d, want rank 1's status 7; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "local rank 1 exited with status 7") {
		t.Errorf("stderr does not name the failed rank:\n%s", stderr)
	}
	for _, kv := range readNUL(t, filepath.Join(out, "env.0")) {
		if kv == "TORCHELASTIC_RESTART_COUNT=2" {
			return
		}
	}
	t.Errorf("TORCHELASTIC_RESTART_COUNT did not follow PIPETTE_RESTART_COUNT")
}

// TestLaunchScriptForwardsSIGTERM: SIGTERM to the script (what the launcher
// sends to stop a host) stops every rank and the script exits non-zero.
func TestLaunchScriptForwardsSIGTERM(t *testing.T) {
	for _, shell := range []string{"sh", "bash"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Fatalf("%s is needed for this test (install it): %v", shell, err)
			}
			job := renderLocal(t, nil, nil)
			out, dir := t.TempDir(), t.TempDir()
			path := filepath.Join(dir, "host0.sh")
			if err := os.WriteFile(path, []byte(job.Hosts[0].Script), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(shell, path)
			cmd.Env = append(os.Environ(), helperOutEnv+"="+out, "HELPER_SLEEP=1", "PIPETTE_STOP_GRACE_S=5")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			for _, r := range job.Hosts[0].Ranks {
				pf := filepath.Join(out, fmt.Sprintf("pid.%d", r.Rank))
				for i := 0; i < 1000; i++ {
					if b, err := os.ReadFile(pf); err == nil && len(b) > 0 {
						pid, _ := strconv.Atoi(string(b))
						pids = append(pids, pid)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if len(pids) != 2 {
				cmd.Process.Kill()
				t.Fatalf("ranks did not start: %v", pids)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
				t.Errorf("script exit after SIGTERM: %v, want a non-zero status", err)
			}
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
					syscall.Kill(pid, syscall.SIGKILL)
					t.Errorf("rank pid %d still exists after the script exited (kill -0: %v)", pid, err)
				}
			}
		})
	}
}

// TestLaunchScriptRunsARealGlooJob starts a real torch.distributed (gloo,
// CPU) job of 3 ranks through the rendered script: the environment it sets
// must be enough for env:// rendezvous and an all-reduce.
func TestLaunchScriptRunsARealGlooJob(t *testing.T) {
	const python = "/usr/bin/python3" // Debian's, with torch (testbed.md)
	if err := exec.Command(python, "-c", "import torch.distributed").Run(); err != nil {
		t.Fatalf("%s cannot import torch.distributed (%v): install the Debian package python3-torch", python, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	script, _ := filepath.Abs("testdata/gloo_allreduce.py")
	out := t.TempDir()
	c := newTestCluster(islandDef{name: "local", hosts: []string{"localhost"}, gpus: 3, gpu: "cpu", nics: []cluster.NICSpec{{Type: cluster.NICEthernet, Count: 1, RateGbitPerS: 10, Netdevs: []string{"lo"}}}})
	p := &search.Plan{Framework: parallel.FrameworkTorch, Config: parallel.Config{TP: 1, PP: 1, DP: 3, CP: 1, VPP: 1, MicroBatch: 1, GlobalBatch: 3}}
	p.Placement = placeInOrder(c, []int{0}, 3, identity)
	job, err := Render(p, c, Options{Script: script, Args: []string{out}, Python: python, MasterAddr: "127.0.0.1", MasterPort: port})
	if err != nil {
		t.Fatal(err)
	}
	code, stderr := runScript(t, job.Hosts[0].Script)
	if code != 0 {
		t.Fatalf("gloo job exited %d:\n%s", code, stderr)
	}
	for r := range 3 {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("rank%d.txt", r)))
		if err != nil {
			t.Fatalf("rank %d wrote nothing: %v\n%s", r, err, stderr)
		}
		want := fmt.Sprintf("rank=%d world=3 local=%d sum=3\n", r, r)
		if string(b) != want {
			t.Errorf("rank %d saw %q, want %q", r, b, want)
		}
	}
}

// TestLaunchScriptRunsFromStdin: the launcher may pipe the script to
// `sh -s`; ranks must not eat the rest of it from stdin.
func TestLaunchScriptRunsFromStdin(t *testing.T) {
	job := renderLocal(t, nastyWords, nil)
	out := t.TempDir()
	cmd := exec.Command("sh", "-s")
	// Padding after the script stays unread while ranks start: a rank
	// that inherited stdin would read it.
	cmd.Stdin = strings.NewReader(job.Hosts[0].Script + strings.Repeat("# padding\n", 10000))
	cmd.Env = append(os.Environ(), helperOutEnv+"="+out, "HELPER_READ_STDIN=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sh -s: %v\n%s", err, b)
	}
	for _, r := range job.Hosts[0].Ranks {
		if in, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("stdin.%d", r.Rank))); err != nil || len(in) != 0 {
			t.Errorf("rank %d read %d bytes of stdin (%v); it must get /dev/null", r.Rank, len(in), err)
		}
		if argv := readNUL(t, filepath.Join(out, fmt.Sprintf("argv.%d", r.Rank))); strings.Join(argv, "\x00") != strings.Join(nastyWords, "\x00") {
			t.Errorf("rank %d argv through sh -s: %q", r.Rank, argv)
		}
	}
}

// The script's status is the rank that failed first on its own: here rank
// 1 (7) fails first; rank 0, which outlives the TERM that follows, exits 5
// later. Rank 0 comes first in wait order, but its failure came after we
// began stopping, so 7 it is.
func TestLaunchScriptStatusIsEarliestOwnFailure(t *testing.T) {
	job := renderLocal(t, nil, nil)
	out := t.TempDir()
	code, stderr := runScript(t, job.Hosts[0].Script, helperOutEnv+"="+out, "HELPER_IGNORE_TERM=1",
		"HELPER_EXIT_RANK_1=7", "HELPER_EXIT_RANK_0=5", "HELPER_DELAY_MS_0=1500", "PIPETTE_STOP_GRACE_S=10")
	if code != 7 {
		t.Fatalf("launch script exited %d, want rank 1's status 7; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"local rank 0 exited with status 5", "local rank 1 exited with status 7"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// What a rank leaves running in its session (a daemonised child, one that
// ignores SIGTERM) is stopped before the script ends; a graceful stop (a
// rank that exits 0 on SIGTERM) still makes the script's status non-zero.
func TestLaunchScriptSweepsLeftoversAndReportsTheSignal(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	j := &job.Job{Name: "sweep", Hosts: []job.HostJob{{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, LocalRank: 0, Argv: []string{"/bin/sh", "-c", `(trap '' TERM; exec sleep 300) >/dev/null 2>&1 & echo $! >"$0"; trap 'echo bye; exit 0' TERM; while :; do sleep 0.1; done`, pidFile}},
	}}}}
	script, err := job.HostScript(j, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "h.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", path)
	cmd.Env = append(os.Environ(), "PIPETTE_STOP_GRACE_S=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var daemon int
	for range 500 {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			daemon, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if daemon == 0 {
		cmd.Process.Kill()
		t.Fatal("the rank did not start its daemon")
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 143 {
		t.Errorf("script exit after SIGTERM with every rank exiting 0: %v, want status 143", err)
	}
	if running(daemon) {
		syscall.Kill(daemon, syscall.SIGKILL)
		t.Errorf("the rank's TERM-ignoring daemon %d outlived the script", daemon)
	}
}

// running: the process exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// TestLaunchScriptKeepsSecretsOffCommandLines: a secret in a rank's
// environment reaches the rank, but no process's command line (what ps
// shows anyone on the host) holds it while the ranks run, and the script
// leaves no file behind that does.
func TestLaunchScriptKeepsSecretsOffCommandLines(t *testing.T) {
	const secret = "tok-3f9a1c77-never-in-ps"
	job := renderLocal(t, []string{"--plain"}, []string{"HF_TOKEN=" + secret})
	out, tmp := t.TempDir(), t.TempDir()
	path := filepath.Join(t.TempDir(), "host0.sh")
	if err := os.WriteFile(path, []byte(job.Hosts[0].Script), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", path)
	cmd.Env = append(os.Environ(), helperOutEnv+"="+out, "HELPER_SLEEP=1", "PIPETTE_STOP_GRACE_S=5", "TMPDIR="+tmp)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range []string{"0", "1"} {
		for {
			if _, err := os.Stat(filepath.Join(out, "env."+r)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %s did not start", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret: %q", p, b)
		}
	}
	if !slices.Contains(readNUL(t, filepath.Join(out, "env.1")), "HF_TOKEN="+secret) {
		t.Errorf("rank 1 does not see HF_TOKEN")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s, left behind, holds the secret", p)
			}
		}
		return nil
	})
}
