// Package hostname is the one rule every host source (cluster file,
// hostfile, --hosts, SLURM_JOB_NODELIST, ~/.ssh/config) applies to host
// names and user names, so that nothing a shell or ssh would read as syntax
// or an option ever reaches a command line.
package hostname

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pipette-launch/pipette-launch/internal/text"
)

// Allowed says what Check accepts, for error messages.
const Allowed = "a host name (letters, digits, '-', '_', '.'; not starting with '-'), an IPv4 address or an IPv6 address"

// AllowedUser says what CheckUser accepts, for error messages.
const AllowedUser = "letters, digits, '.', '_' and '-', not starting with '-'"

// Check returns an error unless s is a DNS-style host name, an IPv4
// address or an IPv6 address (without brackets; a zone such as %eth0 is
// allowed).
func Check(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty host name")
	case len(s) > 253:
		return fmt.Errorf("%d bytes long; a host name has at most 253", len(s))
	case strings.Contains(s, ":"):
		if a, err := netip.ParseAddr(s); err != nil || !a.Is6() || !validZone(a.Zone()) {
			return fmt.Errorf("not an IPv6 address (want %s)", Allowed)
		}
		return nil
	}
	if s[0] == '-' {
		return fmt.Errorf("starts with '-', which ssh would read as an option (want %s)", Allowed)
	}
	if i, c := firstBad(s); i >= 0 {
		return fmt.Errorf("contains %s at byte %d (want %s)", c, i, Allowed)
	}
	if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return fmt.Errorf("has an empty label between dots (want %s)", Allowed)
	}
	return nil
}

// CheckUser returns an error unless u is a plausible login name.
func CheckUser(u string) error {
	switch {
	case u == "":
		return fmt.Errorf("empty user name")
	case len(u) > 64:
		return fmt.Errorf("user name is %d bytes long; at most 64", len(u))
	case u[0] == '-':
		return fmt.Errorf("user name %q starts with '-', which ssh would read as an option", u)
	}
	if i, c := firstBad(u); i >= 0 {
		return fmt.Errorf("user name %q contains %s at byte %d (want %s)", u, c, i, AllowedUser)
	}
	return nil
}

// firstBad finds the first character of s that is not a name byte: its
// byte offset and the character as written ('ü' for a UTF-8 'ü', not the
// 'Ã' its first byte would print as; '\xff' for a byte that is no UTF-8),
// or -1.
func firstBad(s string) (int, string) {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], string(utf8.RuneError)):
			return i, fmt.Sprintf("the byte %q (not UTF-8)", s[i:i+1])
		case r >= utf8.RuneSelf:
			return i, fmt.Sprintf("%q (%U, not ASCII)", r, r)
		case !nameByte(byte(r)):
			return i, fmt.Sprintf("%q", r)
		}
	}
	return -1, ""
}

// Key is the form host names compare in: DNS names are case-insensitive
// (RFC 4343), so n1 and N1 are one host.
func Key(name string) string { return strings.ToLower(name) }

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}

func validZone(z string) bool {
	for i := 0; i < len(z); i++ {
		if !nameByte(z[i]) {
			return false
		}
	}
	return true
}

// Target is a host as written in a host list: user@host:port.
type Target struct {
	User, Host string
	Port       int // 0: not given
}

// ParseTarget parses "host", "user@host", "host:port", "user@host:port" and
// bracketed IPv6 forms such as "[fe80::1]:2222" (a bare IPv6 address takes
// no port), checking the host with Check and the user with CheckUser.
func ParseTarget(s string) (Target, error) {
	orig := s
	s = strings.TrimSpace(s)
	var t Target
	if i := strings.IndexByte(s, '@'); i >= 0 {
		t.User, s = s[:i], s[i+1:]
		if t.User == "" {
			return t, fmt.Errorf("host %q: empty user before '@'", orig)
		}
		if err := CheckUser(t.User); err != nil {
			return t, fmt.Errorf("host %q: %w", orig, err)
		}
	}
	host, port, hasPort := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return t, fmt.Errorf("host %q: unclosed '[' in address", orig)
		}
		rest := s[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return t, fmt.Errorf("host %q: unexpected %q after address", orig, rest)
		}
		host, port, hasPort = s[1:end], strings.TrimPrefix(rest, ":"), rest != ""
		if !strings.Contains(host, ":") {
			return t, fmt.Errorf("host %q: brackets are for IPv6 addresses only", orig)
		}
	case strings.Count(s, ":") == 1:
		host, port, hasPort = strings.Cut(s, ":")
	case strings.Count(s, ":") > 1:
		// A bare IPv6 address carries no port.
		if net.ParseIP(s) == nil {
			return t, fmt.Errorf("host %q: write IPv6 addresses with a port as [addr]:port", orig)
		}
	}
	if host == "" {
		return t, fmt.Errorf("host %q: empty host name", orig)
	}
	if err := Check(host); err != nil {
		return t, fmt.Errorf("host %q: %w", orig, err)
	}
	t.Host = host
	if hasPort {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || !text.Digits(port) {
			return t, fmt.Errorf("host %q: port %q is not a number from 1 to 65535", orig, port)
		}
		t.Port = p
	}
	return t, nil
}
