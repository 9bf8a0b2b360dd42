package cmdutil

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// DidYouMean appends the closest known flag to an "unknown flag" error, in
// its double-dash form (--nproc-per-node, not the -nproc_per_node alias
// the typo was nearest to): torchrun and DeepSpeed users type a mix.
func DidYouMean(err error, flags []cli.Flag) string {
	msg := err.Error()
	typed, ok := strings.CutPrefix(msg, "flag provided but not defined: ")
	if !ok {
		return msg
	}
	typed = strings.TrimLeft(typed, "-")
	key := normFlag(typed)
	best, bestD := "", -1
	for _, f := range flags {
		if bf, ok := f.(*cli.BoolFlag); ok && bf.Hidden && len(f.Names()) == 0 {
			continue
		}
		for _, n := range f.Names() {
			if len(n) < 2 {
				continue
			}
			if d := editDistance(key, normFlag(n)); bestD < 0 || d < bestD {
				best, bestD = f.Names()[0], d
			}
		}
	}
	if best == "" || bestD > max(2, len(key)/3) {
		return msg
	}
	return fmt.Sprintf("%s; did you mean --%s?", msg, best)
}

func normFlag(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Version is the module Version and VCS revision the binary was built
// from (go build records them).
func Version() string {
	v := "(devel)"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v = bi.Main.Version
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " (commit " + rev + modified + ")"
	}
	return v + ", " + bi.GoVersion
}
