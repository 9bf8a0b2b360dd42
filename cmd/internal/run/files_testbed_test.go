package run

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pipette-launch/pipette-launch/cmd/internal/cmdutil"
	"github.com/pipette-launch/pipette-launch/internal/syncbuf"
	"github.com/pipette-launch/pipette-launch/testbed"
)

// checkFilesJob runs a DeepSpeed-style job whose user keeps ds_config.json
// (with an "auto" micro-batch) in the launch directory, which every host
// shares (/var/tmp here, a shared filesystem in real life): the user's
// file is never overwritten; every rank reads the filled-in copy from the
// job's own directory (mode 0700), whose path its argv names.
func checkFilesJob(t *testing.T, tb *testbed.Testbed, dir string) {
	script := `import json, os, sys
p = sys.argv[sys.argv.index('--deepspeed_config') + 1]
c = json.load(open(p))
print('DSCONFIG path=%s micro=%s dirmode=%o' % (p, c['train_micro_batch_size_per_gpu'], os.stat(os.path.dirname(p)).st_mode & 0o777), flush=True)
`
	if err := os.WriteFile(filepath.Join(dir, "dscheck.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(dir, "ds_config.json")
	if err := os.WriteFile(user, []byte(autoDSConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("HOME", t.TempDir()) // the launch probe's cache
	t.Setenv("XDG_CACHE_HOME", "")
	before := dirNames(t, dir)
	args := e2eArgs(tb, dir)
	args = append(args[:len(args)-5], "--framework", "deepspeed", filepath.Join(dir, "dscheck.py"), "--deepspeed", "--deepspeed_config", "ds_config.json")
	var out, errOut syncbuf.Buffer
	if code := runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	// 64 = 4 accumulation steps x 8 ranks x micro-batch 2.
	lines := regexpAll(`DSCONFIG path=(/tmp/pipette-launch-pipette-[^/ ]+)/ds_config.json micro=2 dirmode=700\n`, out.String())
	if len(lines) != 8 {
		t.Fatalf("%d of 8 ranks read a filled-in ds_config.json from a private job directory:\n%s", len(lines), out.String())
	}
	if b, _ := os.ReadFile(user); string(b) != autoDSConfig {
		t.Errorf("the user's ds_config.json was overwritten:\n%s", b)
	}
	// The files directory is on each host's own /tmp (micro=2 above is what
	// the ranks read there); the shared launch directory gains nothing.
	if after := dirNames(t, dir); !slices.Equal(after, before) {
		t.Errorf("the launch directory changed: %v, was %v", after, before)
	}
	// ... and is gone from every host once the job is over.
	assertNoJobDirs(t, tb)
	tb.AssertNothingLeft(t)
	// The launch cached its probe: a dry run of the same job now shows
	// rank 0's real address and every host's interface, connecting nowhere.
	out = syncbuf.Buffer{}
	if code := runApp(append([]string{args[0], args[1], "--dry-run"}, args[2:]...), &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("dry run: exit %d\n%s", code, errOut.String())
	}
	want := []string{"# where ranks meet: from the launch probe of ", "MASTER_ADDR=" + tb.Hosts[0].Addr + "\n"}
	for _, h := range tb.Names() {
		want = append(want, h+" eth0")
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the dry run after the launch lacks %q:\n%s", w, out.String())
		}
	}
	if n := strings.Count(out.String(), "GLOO_SOCKET_IFNAME=eth0\n"); n != 4 {
		t.Errorf("%d of 4 hosts get GLOO_SOCKET_IFNAME=eth0 in the dry run:\n%s", n, out.String())
	}
}

// checkSecretsJob runs a job with secrets in its environment (forwarded
// from the launching shell): every rank sees them, but while the ranks run
// no command line on any host (ps) holds them and no file there that
// others can read does; once the job is over no file on any host holds
// them at all.
func checkSecretsJob(t *testing.T, tb *testbed.Testbed, dir string) {
	const token, key = "hf_tok-81be2c-secret", "wandb-key-5d10f3-secret"
	script := "import os, sys, time\nprint('SECRETS %s %s' % (os.environ.get('HF_TOKEN'), os.environ.get('WANDB_API_KEY')), flush=True)\ntime.sleep(float(sys.argv[1]))\n"
	if err := os.WriteFile(filepath.Join(dir, "secretcheck.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("HF_TOKEN", token)
	t.Setenv("WANDB_API_KEY", key)
	args := e2eArgs(tb, dir)
	args = append(args[:len(args)-5], filepath.Join(dir, "secretcheck.py"), "10")
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runApp(args, &cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	}()
	deadline := time.Now().Add(120 * time.Second)
	for strings.Count(out.String(), "SECRETS "+token+" "+key+"\n") < 8 {
		select {
		case code := <-done:
			t.Fatalf("exit %d before every rank reported\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ranks did not all see the secrets\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
	}
	// The ranks sleep 10 s now: look at every host while they run.
	for _, h := range tb.Names() {
		procs, err := tb.Processes(h)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if strings.Contains(p.Cmdline, token) || strings.Contains(p.Cmdline, key) {
				t.Errorf("%s: the command line of pid %d holds a secret: %q", h, p.Pid, p.Cmdline)
			}
		}
		for _, f := range filesHolding(t, tb, h, dir, token, key) {
			if f.open {
				t.Errorf("%s: %s holds a secret and others can read it", h, f.path)
			}
		}
	}
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, h := range tb.Names() {
		for _, f := range filesHolding(t, tb, h, dir, token, key) {
			t.Errorf("%s: %s, left after the job, holds a secret", h, f.path)
		}
	}
	if strings.Contains(errOut.String(), token) || strings.Contains(errOut.String(), key) {
		t.Errorf("pipette-launch printed a secret:\n%s", errOut.String())
	}
	tb.AssertNothingLeft(t)
}

type heldFile struct {
	path string
	open bool // readable by others: world-readable, in directories others can enter
}

// filesHolding lists the files under host's /tmp, /var/tmp and the launch
// directory that hold any of the secrets, seen through the host's own
// mount namespace (each host has a private /tmp), read from here so that
// no command line carries the secrets.
func filesHolding(t *testing.T, tb *testbed.Testbed, host, launchDir string, secrets ...string) []heldFile {
	t.Helper()
	h, err := tb.Host(host)
	if err != nil {
		t.Fatal(err)
	}
	root := fmt.Sprintf("/proc/%d/root", h.SshdPid)
	var held []heldFile
	for _, top := range []string{"/tmp", "/var/tmp", launchDir} {
		filepath.WalkDir(root+top, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					held = append(held, heldFile{path: strings.TrimPrefix(p, root), open: openToOthers(root, strings.TrimPrefix(p, root))})
					break
				}
			}
			return nil
		})
	}
	return held
}

// openToOthers: a user other than the owner can read path: it is
// world-readable and every directory above it world-searchable.
func openToOthers(root, path string) bool {
	st, err := os.Stat(root + path)
	if err != nil || st.Mode().Perm()&0o004 == 0 {
		return false
	}
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		st, err := os.Stat(root + d)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// assertNoJobDirs: no job files directory (/tmp/pipette-launch-*) is
// left in any host's own /tmp (seen through its mount namespace) once a
// job is over, however it ended.
func assertNoJobDirs(t *testing.T, tb *testbed.Testbed) {
	t.Helper()
	for _, name := range tb.Names() {
		h, err := tb.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		left, err := filepath.Glob(fmt.Sprintf("/proc/%d/root/tmp/pipette-launch-*", h.SshdPid))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("%s: job files directories left after the job: %v", name, left)
		}
	}
}

// dirNames lists dir's entries by name.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// regexpAll returns the first group of every match of re in s.
func regexpAll(re, s string) []string {
	var out []string
	for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
