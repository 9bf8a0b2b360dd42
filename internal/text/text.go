// Package text holds the small string helpers that several packages need
// the same way: a word's plural, an all-digits check, a name made safe as
// one path component.
package text

import "regexp"

// Plural is one when n is 1, else many.
func Plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Digits reports whether s is one or more ASCII digits (no sign, no space).
func Digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SafeName is name as one path component: each run of characters other
// than letters, digits, '.', '_' and '-' becomes "_", and a name that would
// still not be a usable component ("", ".", "..") becomes "job".
func SafeName(name string) string {
	s := unsafeNameChars.ReplaceAllString(name, "_")
	if s == "" || s == "." || s == ".." {
		return "job"
	}
	return s
}
