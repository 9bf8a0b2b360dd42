// Package shellquote quotes strings for POSIX shells so that every byte
// reaches the program unchanged.
package shellquote

import "strings"

// Quote returns s as one POSIX shell word. Words made only of characters no
// shell treats specially are returned bare so rendered commands stay
// readable; everything else is single-quoted, with ' written as '"'"'.
func Quote(s string) string {
	if s != "" && isSafe(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

// Join quotes each word and joins them with spaces.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

func isSafe(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-_./:=@%+,", r):
		default:
			return false
		}
	}
	return true
}
