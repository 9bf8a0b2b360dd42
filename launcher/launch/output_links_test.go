package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenLogsNeverFollowsLinks (issue 31): a link planted at a rank's log
// name is refused, its target untouched; so is a --log-dir others can
// write. A log of an earlier run is replaced.
func TestOpenLogsNeverFollowsLinks(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "logs")
	os.Mkdir(dir, 0o700)
	victim := filepath.Join(base, "victim.txt")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	os.Symlink("../victim.txt", filepath.Join(dir, "b.3.log"))
	os.WriteFile(filepath.Join(dir, "a.0.log"), []byte("an earlier run\n"), 0o644)
	o := newOutput(twoHostJob(), Options{Out: &strings.Builder{}, LogDir: dir}.withDefaults())
	err := o.openLogs()
	o.close()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "b.3.log")+" is a symbolic link") {
		t.Errorf("openLogs with a planted link = %v; want a refusal naming b.3.log", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim.txt holds %q", b)
	}
	os.Remove(filepath.Join(dir, "b.3.log"))
	o = newOutput(twoHostJob(), Options{Out: &strings.Builder{}, LogDir: dir}.withDefaults())
	if err := o.openLogs(); err != nil {
		t.Fatal(err)
	}
	o.close()
	if b, _ := os.ReadFile(filepath.Join(dir, "a.0.log")); len(b) != 0 {
		t.Errorf("a.0.log of an earlier run kept %q; want it replaced", b)
	}
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o777)
	os.Chmod(shared, 0o777)
	o = newOutput(twoHostJob(), Options{Out: &strings.Builder{}, LogDir: shared}.withDefaults())
	if err := o.openLogs(); err == nil || !strings.Contains(err.Error(), "can be written by other users") {
		t.Errorf("openLogs in a world-writable directory = %v; want a refusal", err)
	}
	o.close()
}
