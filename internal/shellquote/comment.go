package shellquote

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Comment returns s made safe to write after a '#' on one line of a shell
// script or a YAML file: every line break either language knows (\n, \r,
// NEL, U+2028, U+2029), every other control character and every byte that
// is not UTF-8 is written as a Go escape (\n, \x1b, \u2028), so a value
// can never end the comment and start a line of its own. The rest is kept
// as it is, so comments stay readable. Apply it last, to the text as it
// should read (a quoted word: Comment(Quote(v))).
func Comment(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeInComment(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	return strings.IndexFunc(s, unsafeInComment) >= 0
}

// unsafeInComment: C0 and C1 controls (C1 holds NEL), DEL, and Unicode's
// line and paragraph separators.
func unsafeInComment(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029'
}
