package remote

import (
	"context"
	"strings"
)

// Runner runs one command line on a host and returns its output; *Conn
// satisfies it.
type Runner interface {
	Run(ctx context.Context, cmd string) (stdout, stderr []byte, err error)
}

// stderrSuffix is a failed command's stderr (its end, when long) as a
// suffix for its error.
func StderrSuffix(stderr []byte) string {
	s := strings.TrimSpace(string(stderr))
	if s == "" {
		return ""
	}
	if len(s) > 400 {
		s = "..." + s[len(s)-400:]
	}
	return " (stderr: " + s + ")"
}
