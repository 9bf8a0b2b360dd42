package scripttest

import (
	"fmt"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// SameLines accepts a value's line breaks inside a word of a command line
// and refuses one in a comment, a missing line and an added one.
func TestSameLines(t *testing.T) {
	skeleton := "#!/bin/sh\n# job " + Marker(0) + " here\nexec x " + Marker(1) + "\n"
	values := []string{"j", "a\nb"}
	for _, tc := range []struct {
		script string
		ok     bool
	}{
		{"#!/bin/sh\n# job 'j' here\nexec x 'a\nb'\n", true},
		{"#!/bin/sh\n# job j\ntouch PWNED here\nexec x 'a\nb'\n", false}, // the comment broke
		{"#!/bin/sh\n# job j here\nexec x 'a\nb'\ntouch PWNED\n", false}, // a line added
		{"#!/bin/sh\n# job j here\nexec x 'a b'\n", false},               // a line missing
		{"#!/bin/bash\n# job j here\nexec x 'a\nb'\n", false},            // a fixed line changed
	} {
		err := SameLines(tc.script, skeleton, values)
		if (err == nil) != tc.ok {
			t.Errorf("SameLines(%q) = %v, want ok %v", tc.script, err, tc.ok)
		}
	}
	if v := []string{"j\nx", "a"}; SameLines("#!/bin/sh\n# job j\\nx here\nexec x a\n", skeleton, v) != nil {
		t.Error("an escaped line break in a comment was refused")
	}
}

// Skip passes over a NUL in a single value and too many words, not the
// NULs that separate a fuzz input's words and variables (the fuzz targets
// used to test the joined text, and so never ran a case of two words).
func TestSkip(t *testing.T) {
	for _, c := range []struct {
		values []string
		lists  []int
		want   bool
	}{
		{[]string{"job", "host"}, []int{len(Words("a b\x00it's")), len(Vars("A=1\x00B=2"))}, false},
		{[]string{"jo\x00b"}, nil, true},
		{nil, []int{MaxItems}, false},
		{nil, []int{2, MaxItems + 1}, true},
	} {
		if got := Skip(c.values, c.lists...); got != c.want {
			t.Errorf("Skip(%q, %v) = %v; want %v", c.values, c.lists, got, c.want)
		}
	}
}

// MarkAll and MarkVars mark in order, a name a shell cannot export with a
// marker it cannot either.
func TestMarkAllVars(t *testing.T) {
	var sk Skeleton
	words := sk.MarkAll([]string{"a", "b"})
	vars := sk.MarkVars([][2]string{{"OK", "1"}, {"A-B", "2"}}, func(n string) bool { return !strings.Contains(n, "-") })
	want := fmt.Sprint([]string{Marker(0), Marker(1)}, [][2]string{{Marker(2), Marker(3)}, {"9" + Marker(4), Marker(5)}})
	if got := fmt.Sprint(words, vars); got != want || fmt.Sprint(sk.Values) != "[a b OK 1 A-B 2]" {
		t.Errorf("marked %s with values %q; want %s with [a b OK 1 A-B 2]", got, sk.Values, want)
	}
}

// A harness's Run returns what its printer saw, and refuses a script that
// prints anything of its own.
func TestHarnessRun(t *testing.T) {
	h := NewHarness(t)
	script := "#!/bin/sh\nX='a b' exec " + strings.Join(h.Printer, " ") + " 'it s' x\n"
	rec, err := h.Run(script, "Y=2")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Check([]string{"it s", "x"}, map[string]string{"X": "a b", "Y": "2", "PATH": HarnessPath}, "PWD"); err != nil || rec.Dir != h.Dir {
		t.Errorf("record %+v: %v; want it run in %s", rec, err, h.Dir)
	}
	if _, err := h.Run("#!/bin/sh\necho hello\nexec " + strings.Join(h.Printer, " ") + "\n"); err == nil || !strings.Contains(err.Error(), "hello") {
		t.Errorf("a script that printed: %v; want an error showing what it printed", err)
	}
}
