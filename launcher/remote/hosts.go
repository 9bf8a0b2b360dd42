package remote

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/pipette-launch/pipette-launch/internal/hostlist"
	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/inputfile"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// HostTarget is one host to connect to. Name is what the user wrote (and
// what ~/.ssh/config is matched against); Addr is where to connect (Name
// unless ~/.ssh/config's HostName or the job says otherwise). Empty User and
// zero Port mean "decide from options, ~/.ssh/config, then defaults".
type HostTarget struct {
	Name string
	User string
	Addr string
	Port int
}

// HostSpec is a host from a host list or hostfile with its slot count
// (0 when the source gave none).
type HostSpec struct {
	HostTarget
	Slots int
}

// String returns the target as user@name:port, leaving out unset parts.
func (t HostTarget) String() string {
	s := t.Name
	if strings.Contains(s, ":") {
		s = "[" + s + "]"
	}
	if t.User != "" {
		s = t.User + "@" + s
	}
	if t.Port != 0 {
		s += ":" + strconv.Itoa(t.Port)
	}
	return s
}

// ParseHostTarget parses "host", "user@host", "host:port", "user@host:port"
// and bracketed IPv6 forms such as "[fe80::1]:2222" with the rule every
// host source shares (internal/hostname).
func ParseHostTarget(s string) (HostTarget, error) {
	t, err := hostname.ParseTarget(s)
	return HostTarget{Name: t.Host, User: t.User, Port: t.Port}, err
}

// key is what two entries for one host share: the target with its name
// case-folded (hostname.Key), so that n1 and N1 are one host.
func (t HostTarget) key() string {
	t.Name = hostname.Key(t.Name)
	return t.String()
}

// ParseHostList expands a --hosts value: comma-separated hosts, each may use
// Slurm hostlist brackets and user@/:port, e.g. "root@node[01-04]:2222,gpu7".
func ParseHostList(expr string) ([]HostSpec, error) {
	names, err := hostlist.Expand(expr)
	if err != nil {
		return nil, err
	}
	out := make([]HostSpec, 0, len(names))
	seen := map[string]bool{}
	for _, n := range names {
		t, err := ParseHostTarget(n)
		if err != nil {
			return nil, fmt.Errorf("--hosts: %w", err)
		}
		if seen[t.key()] {
			return nil, fmt.Errorf("--hosts %q: host %s is listed twice (host names are case-insensitive)", expr, t)
		}
		seen[t.key()] = true
		out = append(out, HostSpec{HostTarget: t})
	}
	return out, nil
}

// dsHostLine is DeepSpeed's hostfile regex (deepspeed/launcher/runner.py).
var dsHostLine = regexp.MustCompile(`^(\S+)\s+slots=(\d+)`)

// ReadHostfile reads a hostfile from disk; see ParseHostfile.
func ReadHostfile(path string) ([]HostSpec, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--hostfile: %w", err)
	}
	defer f.Close()
	return ParseHostfile(path, io.LimitReader(f, limits.MaxFileBytes+1))
}

// ParseHostfile reads a DeepSpeed hostfile ("host slots=N" lines) or a plain
// list of one host per line. Blank lines and lines starting with # are
// skipped; line order is node-rank order. It fails like DeepSpeed does on a
// duplicate host, a malformed entry (including "slots = 4") and a file
// naming no hosts, and on more hosts, slots or bytes than the limits
// allow. name is used in error messages.
func ParseHostfile(name string, r io.Reader) ([]HostSpec, error) {
	var out []HostSpec
	type hostfileEntry struct{ line, index int }
	seen := map[string]hostfileEntry{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), limits.MaxHostfileLine)
	read := 0
	for ln := 1; sc.Scan(); ln++ {
		read += len(sc.Bytes()) + 1
		if read > limits.MaxFileBytes {
			return nil, fmt.Errorf("hostfile %s: larger than %d MiB", name, limits.MaxFileBytes>>20)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		spec, err := parseHostfileLine(line)
		if err != nil {
			return nil, fmt.Errorf("hostfile %s:%d: bad entry %q: %w", name, ln, line, err)
		}
		key := spec.HostTarget.key()
		if prev, dup := seen[key]; dup {
			if first := out[prev.index].HostTarget; first != spec.HostTarget {
				return nil, fmt.Errorf("hostfile %s:%d: duplicate host %s (first on line %d as %s: host names are case-insensitive)", name, ln, spec.HostTarget, prev.line, first)
			}
			return nil, fmt.Errorf("hostfile %s:%d: duplicate host %s (first on line %d)", name, ln, key, prev.line)
		}
		if len(out) == limits.MaxHosts {
			return nil, fmt.Errorf("hostfile %s:%d: more than %d hosts (the limit of one job)", name, ln, limits.MaxHosts)
		}
		seen[key] = hostfileEntry{line: ln, index: len(out)}
		out = append(out, spec)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("hostfile %s: a line longer than %d bytes: not a hostfile", name, limits.MaxHostfileLine)
		}
		return nil, fmt.Errorf("hostfile %s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostfile %s is empty: it names no hosts (write one \"host slots=N\" or \"host\" per line)", name)
	}
	return out, nil
}

// minSSHPort is the lowest port a hostfile's host:port may name besides 22:
// below it a number after the colon is a slot count typed the MPI way.
const minSSHPort = 1024

func parseHostfileLine(line string) (HostSpec, error) {
	fields := strings.Fields(line)
	if len(fields) == 1 {
		t, err := ParseHostTarget(fields[0])
		if err == nil && t.Port != 0 && t.Port < minSSHPort && t.Port != 22 {
			// "worker-0:8" is a slot count written MPI's way, not sshd on
			// port 8: taken as a port it would start one rank over a port
			// nothing listens on.
			return HostSpec{}, fmt.Errorf("%q: port %d is not an SSH port; for %d slots write \"%s slots=%d\" (DeepSpeed's format), for a port write it >= %d", fields[0], t.Port, t.Port, t.Name, t.Port, minSSHPort)
		}
		return HostSpec{HostTarget: t}, err
	}
	m := dsHostLine.FindStringSubmatch(line)
	if m == nil {
		return HostSpec{}, fmt.Errorf(`want "host slots=N" (no spaces around '=') or a single host`)
	}
	if err := checkRepeatedKeys(fields[1:]); err != nil {
		return HostSpec{}, err
	}
	t, err := ParseHostTarget(m[1])
	if err != nil {
		return HostSpec{}, err
	}
	slots, err := strconv.Atoi(m[2])
	if err != nil || slots < 1 || slots > limits.MaxGPUsPerHost {
		return HostSpec{}, fmt.Errorf("slots=%s: want a number from 1 to %d (GPUs per host)", m[2], limits.MaxGPUsPerHost)
	}
	return HostSpec{HostTarget: t, Slots: slots}, nil
}

// checkRepeatedKeys refuses a key=value given twice on one line before
// any # comment ("n1 slots=2 slots=4"): DeepSpeed's regex reads the
// first, the writer may have meant the last; which one counts would be a
// guess.
func checkRepeatedKeys(fields []string) error {
	first := map[string]string{}
	for _, f := range fields {
		if strings.HasPrefix(f, "#") {
			break // a comment: DeepSpeed ignores what follows slots=N
		}
		k, _, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if prev, dup := first[k]; dup {
			return fmt.Errorf("%s is given twice (%s, %s): give it once", k, prev, f)
		}
		first[k] = f
	}
	return nil
}

// HostSources are the places hosts may come from, in order of preference.
type HostSources struct {
	Hosts    string // --hosts expression
	Hostfile string // --hostfile path
	// Getenv reads SLURM_JOB_NODELIST when neither flag is given
	// (os.Getenv when nil).
	Getenv func(string) string
}

// ResolveHosts returns the hosts from --hosts, else --hostfile, else
// SLURM_JOB_NODELIST. Giving both flags is an error: which one wins would
// be a guess.
func ResolveHosts(src HostSources) ([]HostSpec, error) {
	getenv := src.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case src.Hosts != "" && src.Hostfile != "":
		return nil, fmt.Errorf("give either --hosts or --hostfile, not both")
	case src.Hosts != "":
		return ParseHostList(src.Hosts)
	case src.Hostfile != "":
		return ReadHostfile(src.Hostfile)
	}
	if nl := strings.TrimSpace(getenv("SLURM_JOB_NODELIST")); nl != "" {
		hosts, err := ParseHostList(nl)
		if err != nil {
			return nil, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
		}
		return hosts, nil
	}
	return nil, fmt.Errorf("no hosts: pass --hosts node[1-4], --hostfile FILE, or run inside a Slurm allocation (SLURM_JOB_NODELIST)")
}

// Targets returns the HostTarget of each spec.
func Targets(specs []HostSpec) []HostTarget {
	out := make([]HostTarget, len(specs))
	for i, s := range specs {
		out[i] = s.HostTarget
	}
	return out
}
