package text

import "testing"

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "ranks", 1: "rank", 2: "ranks"} {
		if got := Plural(n, "rank", "ranks"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDigits(t *testing.T) {
	for s, want := range map[string]bool{"0": true, "0123": true, "": false, "-1": false, "1a": false, " 1": false, "١": false} {
		if got := Digits(s); got != want {
			t.Errorf("Digits(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"gpt-7b_run.2": "gpt-7b_run.2",
		"a b/c":        "a_b_c",
		"../../etc":    ".._.._etc",
		"$(id);x":      "_id_x",
		"":             "job",
		".":            "job",
		"..":           "job",
		"/":            "_",
	} {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
}
