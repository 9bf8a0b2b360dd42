package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOwnDir: a missing directory is made 0700; a symlink, a file, and a
// directory others can write (or, for secrets, read) are refused with why.
func TestOwnDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	made := filepath.Join(base, "new", "deeper")
	if err := OwnDir(made, true); err != nil {
		t.Fatalf("OwnDir(new) = %v", err)
	}
	if st, _ := os.Stat(made); st == nil || st.Mode().Perm() != 0o700 {
		t.Errorf("made %v; want mode 0700", st)
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(base, "link")
	os.Symlink(mk("target", 0o700), link)
	for _, c := range []struct {
		dir     string
		private bool
		why     string
	}{
		{link, false, "is a symbolic link"},
		{file, false, "is a file, not a directory"},
		{mk("world", 0o777), false, "can be written by other users (mode 0777)"},
		{mk("group", 0o770), false, "can be written by other users (mode 0770)"},
		{mk("readable", 0o755), true, "can be read by other users (mode 0755)"},
		{"", false, "is no directory name"},
	} {
		err := OwnDir(c.dir, c.private)
		var de *DirError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("OwnDir(%s, %v) = %v; want a DirError saying %q", c.dir, c.private, err, c.why)
		}
	}
	if err := OwnDir(mk("shared-read", 0o755), false); err != nil {
		t.Errorf("OwnDir(0755, not private) = %v; want it accepted", err)
	}
}

// TestCreateAllNeverFollowsLinks (issue 31, item 3): a link planted at the
// name, dangling or not, or as a parent directory, is never written
// through; an existing file is not replaced unless asked, and then the
// link itself is replaced, its target untouched.
func TestCreateAllNeverFollowsLinks(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "od")
	if err := OwnDir(dir, true); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(base, "victim.txt")
	os.WriteFile(victim, []byte("precious"), 0o644)
	os.Symlink("../victim.txt", filepath.Join(dir, "n1.sh"))
	os.Symlink("../created-by-link", filepath.Join(dir, "n2.sh"))
	os.Symlink(base, filepath.Join(dir, "sub"))
	os.WriteFile(filepath.Join(dir, "mine.sh"), []byte("user's own"), 0o755)

	for _, name := range []string{"n1.sh", "n2.sh", "mine.sh"} {
		err := CreateAll(dir, []File{{"fresh.sh", []byte("new"), 0o700}, {name, []byte("new"), 0o700}}, false)
		var ee *ExistsError
		if !errors.As(err, &ee) || len(ee.Paths) != 1 || ee.Paths[0] != filepath.Join(dir, name) {
			t.Errorf("CreateAll(%s) = %v; want an ExistsError naming it", name, err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "fresh.sh")); err == nil {
			t.Fatalf("CreateAll refused %s but wrote fresh.sh", name)
		}
	}
	if err := CreateAll(dir, []File{{"sub/x", []byte("new"), 0o600}}, false); err == nil {
		t.Errorf("CreateAll through a linked parent directory succeeded")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("victim.txt now holds %q", b)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
		t.Errorf("victim.txt mode %v; want 0644 kept", st.Mode().Perm())
	}
	for _, p := range []string{filepath.Join(base, "created-by-link"), filepath.Join(base, "x")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was created through a link", p)
		}
	}
	// replace: the link is replaced by a file; its target is untouched.
	if err := CreateAll(dir, []File{{"n1.sh", []byte("new"), 0o700}}, true); err != nil {
		t.Fatalf("CreateAll(replace) = %v", err)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "n1.sh")); fi == nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o700 {
		t.Errorf("n1.sh after replace: %v; want a regular file, mode 0700", fi)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Errorf("victim.txt now holds %q after replace", b)
	}
	// A new file in a new subdirectory: exact mode, directory 0700.
	if err := CreateAll(dir, []File{{"pipette_site/a.cfg", []byte("cfg"), 0o640}}, false); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "pipette_site", "a.cfg")); fi == nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("a.cfg: %v; want mode 0640", fi)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "pipette_site")); fi == nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("pipette_site: %v; want mode 0700", fi)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 5 {
		t.Errorf("od holds %v; want no temp file left", ents)
	}
}

// TestWriteThrough (issue 31, item 7): through a symlink the target gets
// the data and keeps its mode; the link stays a link.
func TestWriteThrough(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.yaml")
	os.WriteFile(target, []byte("old"), 0o600)
	os.Chmod(target, 0o600)
	link := filepath.Join(dir, "cluster.yaml")
	os.Symlink("real.yaml", link)
	if err := WriteThrough(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi == nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", fi)
	}
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Errorf("target holds %q; want new", b)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("target mode %v; want 0600 kept", fi.Mode().Perm())
	}
	// Without a link, the mode is kept too; a new file gets perm.
	if err := WriteThrough(target, []byte("newer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v after a direct write; want 0600 kept", fi.Mode().Perm())
	}
	fresh := filepath.Join(dir, "fresh.yaml")
	if err := WriteThrough(fresh, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v; want 0644", fi.Mode().Perm())
	}
	dangling := filepath.Join(dir, "dangling.yaml")
	os.Symlink("nowhere.yaml", dangling)
	if err := WriteThrough(dangling, []byte("x"), 0o644); err == nil {
		t.Errorf("WriteThrough a dangling link succeeded")
	}
}
