package job

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGraceSeconds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {500 * time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {30 * time.Second, 30}} {
		if got := GraceSeconds(tc.d); got != tc.want {
			t.Errorf("GraceSeconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// A host script run by hand (what --output-dir writes) gives its ranks
// run's --stop-grace between SIGTERM and SIGKILL, torchrun's 30 s when none
// was given, and PIPETTE_STOP_GRACE_S still wins. Run by a real sh: one
// rank fails, the other ignores SIGTERM, so the script ends only with the
// KILL it sends a grace after the TERM.
func TestHostScriptStopGrace(t *testing.T) {
	t.Parallel()
	stubborn := RankJob{Argv: []string{"/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"}}
	failing := RankJob{LocalRank: 1, Rank: 1, Argv: []string{"/bin/sh", "-c", "sleep 0.2; exit 3"}}
	render := func(grace int) string {
		t.Helper()
		s, err := HostScript(&Job{Name: "j", StopGrace: grace, Hosts: []HostJob{{Name: "h", Ranks: []RankJob{stubborn, failing}}}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := render(0); !strings.Contains(s, "G=${PIPETTE_STOP_GRACE_S:-30}\n") {
		t.Errorf("no --stop-grace: the script's default is not torchrun's 30 s:\n%s", s)
	}
	run := func(script string, env ...string) time.Duration {
		t.Helper()
		dir := t.TempDir()
		path := filepath.Join(dir, "host.sh")
		if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", path)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Fatalf("script ended with %v, want the failed rank's status 3", err)
		}
		return took
	}
	// Only the grace is bounded from below; above, a wide margin for a
	// busy machine.
	if took := run(render(2)); took < 2*time.Second || took > 25*time.Second {
		t.Errorf("--stop-grace 2s: the script ended %s after it started; want the KILL 2 s after the failure's TERM", took)
	}
	if took := run(render(60), "PIPETTE_STOP_GRACE_S=1"); took < time.Second || took > 25*time.Second {
		t.Errorf("PIPETTE_STOP_GRACE_S=1 over a script written with 60: ended after %s", took)
	}
}
