package shellquote

import (
	"os/exec"
	"strings"
	"testing"
)

func TestQuoteRoundTripsThroughSh(t *testing.T) {
	words := []string{
		"plain", "", "with space", "it's", `"double"`, "$HOME", "`id`", "a;b", "*", "new\nline",
		"tab\there", "ünïcødé", `back\slash`, "'", "''", "-n", "--flag=a b", "!bang", "~", "a=b c",
	}
	for _, w := range words {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(w)).Output()
		if err != nil {
			t.Fatalf("sh -c for %q: %v", w, err)
		}
		if string(out) != w {
			t.Errorf("Quote(%q) through sh gave %q", w, out)
		}
	}
}

func TestQuoteKeepsSafeWordsBare(t *testing.T) {
	for _, w := range []string{"pretrain_gpt.py", "--num-layers", "24", "a=b", "/usr/bin/python3", "host:rank"} {
		if got := Quote(w); got != w {
			t.Errorf("Quote(%q) = %q, want bare", w, got)
		}
	}
}

func TestJoin(t *testing.T) {
	got := Join([]string{"echo", "a b", "c"})
	if want := "echo 'a b' c"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
	if strings.Count(Join([]string{"x", "y"}), " ") != 1 {
		t.Error("Join should separate words by one space")
	}
}
