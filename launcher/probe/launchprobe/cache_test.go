package launchprobe

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/launcher/remote"
)

// TestLaunchProbeCache: a saved probe comes back for the same job shape
// while fresh; another python, rank 0, user, port, a stale or a corrupt
// entry is a miss; the files are the user's own.
func TestLaunchProbeCache(t *testing.T) {
	c := Cache{Dir: filepath.Join(t.TempDir(), "cache")}
	targets := []remote.HostTarget{{Name: "a", Addr: "10.0.0.1"}, {Name: "b", User: "u", Port: 2222}}
	now := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	lp := &Result{MasterAddr: "10.0.0.1", ProbedAt: now.Add(-time.Hour), Hosts: []HostRoute{
		{Target: targets[0].String(), Ifname: "eth0", Python: "/v/bin/python3", PythonFound: true},
		{Target: targets[1].String(), Ifname: "ib0", Python: "/v/bin/python3"},
	}}
	if err := c.Save(targets, 0, "/v/bin/python3", lp); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Load(targets, 0, "/v/bin/python3", 2*time.Hour, now)
	if !ok || got.MasterAddr != "10.0.0.1" || got.Hosts[1].Ifname != "ib0" || !got.Hosts[0].PythonFound {
		t.Fatalf("Load = %+v, %v", got, ok)
	}
	other := []remote.HostTarget{targets[0], {Name: "b", User: "u", Port: 22}}
	for name, miss := range map[string]func() bool{
		"python":  func() bool { _, ok := c.Load(targets, 0, "/usr/bin/python3", 2*time.Hour, now); return ok },
		"rank 0":  func() bool { _, ok := c.Load(targets, 1, "/v/bin/python3", 2*time.Hour, now); return ok },
		"port":    func() bool { _, ok := c.Load(other, 0, "/v/bin/python3", 2*time.Hour, now); return ok },
		"too old": func() bool { _, ok := c.Load(targets, 0, "/v/bin/python3", 30*time.Minute, now); return ok },
	} {
		if miss() {
			t.Errorf("%s: want a miss", name)
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.Dir, "launch-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	if err := os.WriteFile(files[0], []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Load(targets, 0, "/v/bin/python3", 2*time.Hour, now); ok {
		t.Errorf("a corrupt entry must be a miss")
	}
}
