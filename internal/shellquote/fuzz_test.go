package shellquote

import (
	"os/exec"
	"strings"
	"testing"
)

// Every string survives Quote through a real /bin/sh unchanged (what a
// remote shell line does to an argument). NUL cannot be in an argument.
func FuzzQuoteRoundTrip(f *testing.F) {
	for _, s := range []string{"", "plain", "it's", `a"b`, "$(id)", "`id`", "a b\tc\nd", "--lr=6.0e-5", "~root", "*", "\\", "-oProxyCommand=x", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			return
		}
		out, err := exec.Command("/bin/sh", "-c", "printf '%s' "+Quote(s)).Output()
		if err != nil {
			t.Fatalf("sh: %v", err)
		}
		if string(out) != s {
			t.Fatalf("%q came back as %q via %s", s, out, Quote(s))
		}
	})
}
