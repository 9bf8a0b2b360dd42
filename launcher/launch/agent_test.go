package launch

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/internal/hostclock"
	"github.com/pipette-launch/pipette-launch/templates/job"
)

// runAgent runs a rendered agent under setsid, as Launch does over SSH,
// and returns its stdout lines; stdin stays open until closeAfter.
func startAgent(t *testing.T, h job.HostJob, grace int) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	return startAgentHB(t, h, grace, 0)
}

func startAgentHB(t *testing.T, h job.HostJob, grace, heartbeat int) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	wd := t.TempDir()
	script, err := agentScript(job.Job{Name: "test", WorkDir: wd, Hosts: []job.HostJob{h}}, 0, "N0NCE", grace, heartbeat, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setsid", "-w", "/bin/sh", "-c", script)
	stdin, sc := startPiped(t, cmd)
	return cmd, stdin, sc
}

// startPiped starts cmd with its stdin and stdout piped, and ends it when
// the test does.
func startPiped(t *testing.T, cmd *exec.Cmd) (io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd.Path, err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	return stdin, bufio.NewScanner(stdout)
}

func TestAgentRunsRanksWithExactEnvAndArgs(t *testing.T) {
	weird := `it's "quoted" $HOME ; rm -rf / * \n`
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 4, LocalRank: 0, Env: []job.EnvVar{{Name: "RANK", Value: "4"}, {Name: "ODD", Value: weird}},
			Argv: []string{"/bin/sh", "-c", `printf '%s|%s|%s\n' "$RANK" "$ODD" "$1"; pwd; printf 'no newline at end'; : >rank4-done`, "sh", weird}},
		// Rank 5 fails only once rank 4 is through: a failing rank makes the
		// agent stop the others, and on a busy machine rank 4 could be
		// stopped before its first line (CI saw it: exit 143).
		{Rank: 5, LocalRank: 1, Argv: []string{"/bin/sh", "-c", "i=0; while [ ! -e rank4-done ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; echo to-stderr >&2; exit 3"}},
	}}
	_, stdin, sc := startAgent(t, h, 2)
	defer stdin.Close()
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "@@pipette-N0NCE clock ") || !strings.HasPrefix(lines[1], "@@pipette-N0NCE pgid ") || !strings.HasPrefix(lines[2], "@@pipette-N0NCE wd ") {
		t.Fatalf("agent must report its clock, pgid then watchdog first; got %q", lines)
	}
	if ts, err := hostclock.ParseNanos(strings.TrimPrefix(lines[0], "@@pipette-N0NCE clock ")); err != nil || time.Since(ts).Abs() > time.Minute {
		t.Errorf("clock line %q: %v, %v", lines[0], ts, err)
	}
	got := strings.Join(lines[3:], "\n")
	// Each exit line carries the host's clock at the rank's end, in
	// nanoseconds: the launcher orders failures across hosts by it.
	stamps := map[string]time.Time{}
	for _, l := range lines {
		if m := regexp.MustCompile(`^(\d+) @@pipette-N0NCE exit (\d+ \d+) (\d+) 0$`).FindStringSubmatch(l); m != nil {
			ts, err := hostclock.ParseNanos(m[3])
			if err != nil || time.Since(ts).Abs() > time.Minute {
				t.Errorf("exit line %q: stamp %v, %v: want the host's clock now", l, ts, err)
			}
			stamps[m[1]+" "+m[2]] = ts
			got = strings.Replace(got, l, m[1]+" @@pipette-N0NCE exit "+m[2], 1)
		}
	}
	if len(stamps) != 2 {
		t.Errorf("exit lines with stamps: %v, want ranks 4 and 5", stamps)
	}
	for _, want := range []string{
		"4 4|" + weird + "|" + weird,
		"4 no newline at end",
		"4 @@pipette-N0NCE exit 4 0",
		"5 to-stderr",
		"5 @@pipette-N0NCE exit 5 3",
		"@@pipette-N0NCE done",
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("agent output lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasSuffix(got, "@@pipette-N0NCE done") {
		t.Errorf("done must come last:\n%s", got)
	}
	// Each rank's exit line follows its own output.
	if strings.Index(got, "4 no newline at end") > strings.Index(got, "4 @@pipette-N0NCE exit 4 0") {
		t.Errorf("rank 4's exit line came before its output:\n%s", got)
	}
}

func TestAgentWatchdogStopsGroupOnStdinEOF(t *testing.T) {
	// A rank that ignores TERM: the watchdog must KILL it after the grace.
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, Argv: []string{"/bin/sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.2; done"}},
		{Rank: 1, Argv: []string{"sleep", "300"}},
	}}
	cmd, stdin, sc := startAgent(t, h, 1)
	pgid := pgidWhenRank0Up(t, sc)
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Fatalf("process group %d not running: %v", pgid, err)
	}
	start := time.Now()
	stdin.Close() // what happens when the SSH session dies
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	for groupAlive(pgid) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("process group %d still alive 10s after stdin EOF", pgid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("group gone after %s: the TERM-ignoring rank should have lasted the 1s grace", d)
	}
	<-done
}

// With a heartbeat timeout, the watchdog stops the ranks when stdin stays
// silent that long though it never closes (a network cut): not while
// heartbeats arrive, and within the timeout plus the grace once they stop.
func TestAgentHeartbeatTimeoutStopsGroup(t *testing.T) {
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, Argv: []string{"/bin/sh", "-c", "trap '' TERM; echo up; while :; do sleep 0.2; done"}},
		{Rank: 1, Argv: []string{"sleep", "300"}},
	}}
	cmd, stdin, sc := startAgentHB(t, h, 1, 2)
	defer stdin.Close()
	pgid := pgidWhenRank0Up(t, sc)
	go func() {
		for sc.Scan() {
		}
	}()
	// 4 s of heartbeats every 0.4 s: twice the timeout, the ranks run on.
	for range 10 {
		if _, err := stdin.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if !groupAlive(pgid) {
		t.Fatal("ranks stopped though heartbeats kept coming")
	}
	// Silence, stdin still open: stopped after the 2 s timeout (the
	// TERM-ignoring rank lasts the 1 s grace).
	start := time.Now()
	for groupAlive(pgid) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("process group %d still alive 15s into the silence (timeout 2s, grace 1s)", pgid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("stopped %s into the silence, before the 2s timeout", d)
	}
	t.Logf("stopped %s into the silence (timeout 2s + grace 1s)", time.Since(start))
	cmd.Wait()
}

// groupAlive reports whether a process of group pgid is running (zombies,
// dead but not yet reaped by init, do not count).
func groupAlive(pgid int) bool {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// A program whose path holds "=" must run, not become an assignment (GNU
// env treats such words as assignments even after "--").
func TestAgentRunsProgramWithEqualsInPath(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "a=b")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"ran $A $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{{Rank: 0, Env: []job.EnvVar{{Name: "A", Value: "1"}}, Argv: []string{prog, "x y"}}}}
	_, stdin, sc := startAgent(t, h, 1)
	defer stdin.Close()
	var out []string
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if !slices.Contains(out, "0 ran 1 x y") {
		t.Errorf("agent output %q lacks \"0 ran 1 x y\"", out)
	}
}

func TestWithRestartEnv(t *testing.T) {
	env := []job.EnvVar{{Name: "A", Value: "1"}, {Name: "TORCHELASTIC_RESTART_COUNT", Value: "0"}}
	got := withRestartEnv(env, 2, 3)
	want := []job.EnvVar{{Name: "A", Value: "1"}, {Name: "TORCHELASTIC_RESTART_COUNT", Value: "2"}, {Name: "TORCHELASTIC_MAX_RESTARTS", Value: "3"}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	if env[1].Value != "0" {
		t.Errorf("input env modified")
	}
}

func TestAgentLeavesNothingAfterDone(t *testing.T) {
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, Argv: []string{"true"}},
		// A daemonised child left in the group must be stopped too,
		{Rank: 1, Argv: []string{"/bin/sh", "-c", "sleep 300 >/dev/null 2>&1 & echo started"}},
		// also one that ignores SIGTERM (KILL after the grace period).
		{Rank: 2, Argv: []string{"/bin/sh", "-c", "trap '' TERM; sleep 301 >/dev/null 2>&1 & echo started"}},
	}}
	for i := range 10 { // the watchdog race shows up rarely: repeat
		cmd, stdin, sc := startAgent(t, h, 1)
		var pgid, wd int
		for sc.Scan() {
			l := sc.Text()
			if p, ok := strings.CutPrefix(l, "@@pipette-N0NCE pgid "); ok {
				pgid, _ = strconv.Atoi(p)
			}
			if p, ok := strings.CutPrefix(l, "@@pipette-N0NCE wd "); ok {
				wd, _ = strconv.Atoi(p)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("agent: %v", err)
		}
		// stdin is still open, as while the SSH session lingers: the
		// watchdog must be gone already, and the group with the daemon.
		time.Sleep(100 * time.Millisecond)
		if syscall.Kill(wd, 0) == nil {
			t.Fatalf("run %d: watchdog %d alive after done", i, wd)
		}
		if groupAlive(pgid) {
			ps, _ := exec.Command("ps", "-o", "pid,ppid,pgid,stat,cmd", "-g", strconv.Itoa(pgid)).CombinedOutput()
			t.Fatalf("run %d: process group %d alive after done:\n%s", i, pgid, ps)
		}
		stdin.Close()
	}
}

// agentStartCommand runs exactly the n bytes it was sent, from a private
// directory of its own, and refuses a short upload.
func TestAgentStartCommand(t *testing.T) {
	script := "echo ran from \"$0\"\n"
	for _, tc := range []struct {
		name    string
		n       int
		wantRun bool
	}{
		{"complete", len(script), true},
		{"truncated", len(script) + 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", agentStartCommand(tc.n))
			cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
			cmd.Stdin = strings.NewReader(script)
			out, err := cmd.CombinedOutput()
			ran := strings.Contains(string(out), "ran from")
			if ran != tc.wantRun || (err == nil) != tc.wantRun {
				t.Fatalf("ran=%v err=%v, want ran=%v\n%s", ran, err, tc.wantRun, out)
			}
			if tc.wantRun && !strings.Contains(string(out), "/pipette-agent.") {
				t.Errorf("agent did not run from its private directory: %s", out)
			}
			if !tc.wantRun && !strings.Contains(string(out), "agent upload incomplete") {
				t.Errorf("no message for the short upload: %s", out)
			}
		})
	}
}

// A graceful stop (TERM to the host's process group, as stopCommand and the
// watchdog send) must let a rank finish its shutdown: its last output lines
// (a checkpoint message, say) still arrive, nothing gets EPIPE, and its exit
// status is reported.
func TestAgentGracefulStopKeepsRankOutput(t *testing.T) {
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, Argv: []string{"/bin/sh", "-c", `trap 'sleep 0.3; echo checkpoint saved; exit 0' TERM; echo up; while :; do sleep 0.1; done`}},
	}}
	cmd, _, sc := startAgent(t, h, 5)
	pgid := pgidWhenRank0Up(t, sc)
	var lines []string
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	cmd.Wait()
	out := strings.Join(lines, "\n")
	for _, want := range []string{"0 checkpoint saved", "0 @@pipette-N0NCE exit 0 0", "@@pipette-N0NCE done"} {
		if !strings.Contains(out, want) {
			t.Errorf("after TERM to the group, output lacks %q:\n%s", want, out)
		}
	}
}

// pgidWhenRank0Up reads agent output up to rank 0's "up" line and returns
// the process group the agent reported before starting it.
func pgidWhenRank0Up(t *testing.T, sc *bufio.Scanner) int {
	t.Helper()
	pgid := 0
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "@@pipette-N0NCE pgid "); ok {
			pgid, _ = strconv.Atoi(p)
		}
		if l == "0 up" {
			break
		}
	}
	if pgid <= 1 {
		t.Fatal("no pgid reported")
	}
	return pgid
}

// One script: what run starts on a host is the script --output-dir writes
// for it, with only run's control lines added after the first line.
func TestAgentIsTheHostScript(t *testing.T) {
	j := job.Job{Name: "j", WorkDir: "/w", LogDir: "logs", Hosts: []job.HostJob{
		{Name: "a", Ranks: []job.RankJob{{Rank: 0, Argv: []string{"true"}}}},
		{Name: "b", NodeRank: 1, Ranks: []job.RankJob{{Rank: 1, Env: []job.EnvVar{{Name: "X", Value: "it's"}}, Argv: []string{"true"}}}},
	}}
	j.LogDir = "" // run keeps the logs on the launching machine
	want, err := job.HostScript(&j, 1)
	if err != nil {
		t.Fatal(err)
	}
	first, rest, _ := strings.Cut(want, "\n")
	j.LogDir = "logs"
	for _, tc := range []struct{ removeFiles, line string }{
		{"", "PIPETTE_CONTROL=@@pipette-N0NCE PIPETTE_STOP_GRACE_S=5 PIPETTE_HEARTBEAT_S=30 PIPETTE_RESTART_COUNT=2\n"},
		{"rm -rf -- '/tmp/x y'", "PIPETTE_CONTROL=@@pipette-N0NCE PIPETTE_STOP_GRACE_S=5 PIPETTE_HEARTBEAT_S=30 PIPETTE_RESTART_COUNT=2 " +
			`PIPETTE_REMOVE_FILES='rm -rf -- '"'"'/tmp/x y'"'"''` + "\n"},
	} {
		agent, err := agentScript(j, 1, "N0NCE", 5, 30, 2, tc.removeFiles)
		if err != nil {
			t.Fatal(err)
		}
		control := "# pipette-launch run: control lines (the rest is the host script --output-dir writes)\n" + tc.line
		if agent != first+"\n"+control+rest {
			t.Errorf("the agent is not the host script plus control lines:\n%s", agent)
		}
	}
}

// TestAgentRemovesJobFilesOnceItsWatchdogStopsIt: the launcher does not
// reach a host it lost again, so the agent, started as Launch starts it
// (agentStartCommand: from a private directory of its own), removes the
// job's files directory once its watchdog has stopped the ranks, whether
// the launcher closed its session (a stop, a dropped connection) or fell
// silent (a network cut), and also when a rank outlives the grace (the
// watchdog then KILLs the agent and cleans up after it); nothing of the
// agent's own is left in TMPDIR either. An agent whose ranks all finished
// keeps the files (a restart uses them; the launcher removes them). An
// agent that removed them says so ("files-removed"), so that a launcher
// that can still reach the host does not open a session to do it again.
func TestAgentRemovesJobFilesOnceItsWatchdogStopsIt(t *testing.T) {
	const ignoresTerm = "trap '' TERM; echo up; while :; do sleep 0.2; done"
	const yes, no, either = "yes", "no", "either" // the report: the watchdog's KILL may cut it
	for _, tc := range []struct {
		name       string
		rank       string
		heartbeat  int
		eof        bool // close stdin once the rank is up
		wantFiles  bool
		wantReport string
	}{
		{name: "stopped by the launcher (EOF)", rank: "echo up; exec sleep 300", eof: true, wantReport: yes},
		{name: "the launcher fell silent (heartbeat)", rank: "echo up; exec sleep 300", heartbeat: 1, wantReport: yes},
		{name: "a rank ignores TERM (KILL after the grace)", rank: ignoresTerm, eof: true, wantReport: either},
		{name: "the ranks finished", rank: "echo up", wantFiles: true, wantReport: no},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp, filesDir := t.TempDir(), filepath.Join(t.TempDir(), "pipette-launch-j")
			if err := os.Mkdir(filesDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(filesDir, "ds_config.json"), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
			j := job.Job{Name: "j", WorkDir: t.TempDir(), FilesDir: filesDir, Files: []job.File{{Path: "ds_config.json"}},
				Hosts: []job.HostJob{{Name: "h", Ranks: []job.RankJob{{Rank: 0, Argv: []string{"/bin/sh", "-c", tc.rank}}}}}}
			script, err := agentScript(j, 0, "N0NCE", 1, tc.heartbeat, 0, j.RemoveFilesDirScript())
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/bin/sh", "-c", agentStartCommand(len(script)))
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stdin, sc := startPiped(t, cmd)
			if _, err := stdin.Write([]byte(script)); err != nil {
				t.Fatal(err)
			}
			for sc.Scan() && !strings.HasSuffix(sc.Text(), " up") {
			}
			if tc.eof {
				stdin.Close()
			}
			reported := false
			for sc.Scan() {
				reported = reported || sc.Text() == "@@pipette-N0NCE files-removed"
			}
			cmd.Wait()
			if tc.wantReport != either && reported != (tc.wantReport == yes) {
				t.Errorf("the agent reported removing the files: %v, want %s", reported, tc.wantReport)
			}
			// The watchdog may outlive the agent it KILLed by a moment.
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, statErr := os.Stat(filesDir)
				left, _ := os.ReadDir(tmp)
				if (statErr == nil) == tc.wantFiles && len(left) == 0 {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("files directory there: %v, want %v; left in TMPDIR: %v", statErr == nil, tc.wantFiles, left)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// TestAgentReportsExitWhileAChildHoldsTheOutput: a failing rank that leaves
// a child holding its output open (a helper ignoring TERM) is reported at
// once, not after the KILL that ends the child a grace period later: by
// then the ranks that failed because of it have reported, and the job may
// be torn down before its report arrives (the summary then blamed one of
// those).
func TestAgentReportsExitWhileAChildHoldsTheOutput(t *testing.T) {
	h := job.HostJob{Name: "h", Ranks: []job.RankJob{
		{Rank: 0, Argv: []string{"/bin/sh", "-c", "(trap '' TERM; exec sleep 60) & echo failing; printf 'last words'; exit 3"}},
		{Rank: 1, Argv: []string{"sleep", "300"}},
	}}
	_, stdin, sc := startAgent(t, h, 20)
	defer stdin.Close()
	var failing time.Time
	var lines []string
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		if l == "0 failing" {
			failing = time.Now()
		}
		if strings.HasPrefix(l, "0 @@pipette-N0NCE exit 0 3 ") {
			if failing.IsZero() {
				t.Fatalf("exit line before the rank's output:\n%s", strings.Join(lines, "\n"))
			}
			if took := time.Since(failing); took > 10*time.Second {
				t.Errorf("rank 0's exit came %s after it failed: held back by its child (grace 20s)", took)
			}
			// The agent's own lines (killer, from stopping the other
			// rank) may come between: rank 0's stream is what is checked.
			if prev := lastLineOfRank0(lines[:len(lines)-1]); prev != "0 last words" {
				t.Errorf("the rank's last line (no newline) must come just before its exit in its stream, got %q:\n%s", prev, strings.Join(lines, "\n"))
			}
			return
		}
	}
	t.Fatalf("no exit line for rank 0:\n%s", strings.Join(lines, "\n"))
}

// lastLineOfRank0 is the last of lines tagged as rank 0's output ("0 ..."),
// or "".
func lastLineOfRank0(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "0 ") {
			return lines[i]
		}
	}
	return ""
}
