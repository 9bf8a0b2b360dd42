package shellquote

import (
	"os/exec"
	"strings"
	"testing"
)

// A comment made by Comment stays one line and one comment for sh (and
// for YAML: no \n, \r or NEL survives), whatever the value holds.
func TestCommentIsOneLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain job", "plain job"},
		{"a\ntouch PWNED\n", `a\ntouch PWNED\n`},
		{"cr\rlf", `cr\rlf`},
		{"tab\there", `tab\there`},
		{"esc\x1b[2J", `esc\x1b[2J`},
		{"nel\u0085x", `nel\u0085x`},
		{"ls\u2028ps\u2029", `ls\u2028ps\u2029`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"ünïcødé 'q' \\", "ünïcødé 'q' \\"},
	}
	for _, c := range cases {
		got := Comment(c.in)
		if got != c.want {
			t.Errorf("Comment(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.ContainsAny(got, "\n\r\u0085\u2028\u2029") {
			t.Errorf("Comment(%q) = %q still breaks the line", c.in, got)
		}
		script := "# job " + Comment(Quote(c.in)) + "\necho ok\n"
		out, err := exec.Command("sh", "-c", script).CombinedOutput()
		if err != nil || string(out) != "ok\n" {
			t.Errorf("comment of %q ran more than a comment: %v %q", c.in, err, out)
		}
	}
}
