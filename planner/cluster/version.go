package cluster

import (
	"strconv"
	"strings"
)

// ParseVersion reads the leading numbers of "2.21.5", "2.4.0+cu121",
// "0.11.0rc0"; false for "" or text without a number.
func ParseVersion(v string) ([]int, bool) {
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	var out []int
	for _, part := range strings.Split(v, ".") {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, _ := strconv.Atoi(part[:end])
		out = append(out, n)
		if end < len(part) {
			break
		}
	}
	return out, len(out) > 0
}

// VersionLess compares version numbers as read by ParseVersion (missing
// parts count as 0).
func VersionLess(a, b []int) bool {
	for i := range max(len(a), len(b)) {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// OldestVersion is the older of two versions; "" (unknown) wins, since
// an unknown version cannot be shown to be recent enough.
func OldestVersion(a, b string) string {
	na, oka := ParseVersion(a)
	nb, okb := ParseVersion(b)
	switch {
	case !oka:
		return ""
	case !okb:
		return ""
	case VersionLess(nb, na):
		return b
	}
	return a
}
