package testbed

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// RDMA kinds a host's fake NIC can have.
const (
	RDMANone       = ""
	RDMAInfiniBand = "infiniband"
	RDMARoCE       = "roce"
)

// DefaultStateRoot holds one directory per test-bed instance. It is outside
// /tmp on purpose: every host mounts a private /tmp that would hide it.
const DefaultStateRoot = "/var/lib/pipette-testbed"

// Spec describes a test-bed to build.
type Spec struct {
	// Name labels the instance (shown by status, used by `down --name`).
	Name string
	// Hosts to create; at least one.
	Hosts []HostSpec
	// GroupShape is the tc rate (e.g. "100mbit") of links between groups of
	// hosts; links inside a group are unshaped. Empty: no shaping.
	GroupShape string
	// StateRoot overrides DefaultStateRoot.
	StateRoot string
	// Persistent marks an instance that outlives the process that made it
	// (the CLI's `up`). Others are reclaimed once their owner process is dead.
	Persistent bool
	// Slurm also starts a real Slurm cluster on the hosts (slurm.go).
	Slurm bool `json:",omitempty"`
	// Names is how host names resolve on the hosts: NamesResolve (default)
	// lists every test-bed host in each host's /etc/hosts; NamesNone lists
	// none, so no host's name (its own included) resolves; NamesLoopback
	// maps each host's own name to 127.0.1.1, as Debian images and many
	// containers do, and lists the others.
	Names string `json:",omitempty"`
}

// Name resolution choices for Spec.Names.
const (
	NamesResolve  = ""
	NamesNone     = "none"
	NamesLoopback = "loopback"
)

// HostSpec describes one host.
type HostSpec struct {
	// Name is the host's hostname and ssh_config alias.
	Name string
	// Group names the host's island; hosts of one group share an unshaped
	// bridge. Empty means the group "default".
	Group string
	// RDMA is "", "infiniband" or "roce": the fake NIC in the host's sysfs.
	RDMA string
	// RateGbitPerS is the port rate the fake NIC reports (default 200).
	RateGbitPerS int
	// Shape is an optional tc rate (e.g. "1gbit") for this host's own link,
	// applied in both directions on top of any group shaping.
	Shape string
}

const defaultGroup = "default"

var hostNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// maxHosts keeps addresses 198.18.k.(10+i) inside the /24.
const maxHosts = 244

// maxGroups keeps generated interface names short.
const maxGroups = 99

func (s *Spec) stateRoot() string {
	if s.StateRoot != "" {
		return s.StateRoot
	}
	return DefaultStateRoot
}

func (h HostSpec) group() string {
	if h.Group == "" {
		return defaultGroup
	}
	return h.Group
}

func (h HostSpec) rate() int {
	if h.RateGbitPerS <= 0 {
		return 200
	}
	return h.RateGbitPerS
}

// Validate reports the first problem with the spec, naming the field.
func (s *Spec) Validate() error {
	if root := filepath.Clean(s.stateRoot()); root == "/tmp" || strings.HasPrefix(root, "/tmp/") || !filepath.IsAbs(root) {
		return fmt.Errorf("testbed spec %q: state root %q: use an absolute path outside /tmp (every host mounts a private /tmp that would hide its sshd config and keys)", s.Name, s.StateRoot)
	}
	if len(s.Hosts) == 0 {
		return fmt.Errorf("testbed spec %q: no hosts: give at least one", s.Name)
	}
	if len(s.Hosts) > maxHosts {
		return fmt.Errorf("testbed spec %q: %d hosts: at most %d fit in one /24", s.Name, len(s.Hosts), maxHosts)
	}
	if s.GroupShape != "" {
		if _, err := ParseRate(s.GroupShape); err != nil {
			return fmt.Errorf("testbed spec %q: group shape: %w", s.Name, err)
		}
	}
	switch s.Names {
	case NamesResolve, NamesNone, NamesLoopback:
	default:
		return fmt.Errorf("testbed spec %q: names %q: want \"\" (resolve), %q or %q", s.Name, s.Names, NamesNone, NamesLoopback)
	}
	seen := map[string]bool{}
	groups := map[string]bool{}
	for i, h := range s.Hosts {
		if !hostNameRE.MatchString(h.Name) {
			return fmt.Errorf("testbed spec %q: host %d name %q: use lower-case letters, digits and '-', starting with a letter", s.Name, i, h.Name)
		}
		if seen[h.Name] {
			return fmt.Errorf("testbed spec %q: host name %q appears twice", s.Name, h.Name)
		}
		seen[h.Name] = true
		groups[h.group()] = true
		switch h.RDMA {
		case RDMANone, RDMAInfiniBand, RDMARoCE:
		default:
			return fmt.Errorf("testbed spec %q: host %s: RDMA %q: want \"\", %q or %q", s.Name, h.Name, h.RDMA, RDMAInfiniBand, RDMARoCE)
		}
		if h.RateGbitPerS < 0 {
			return fmt.Errorf("testbed spec %q: host %s: negative NIC rate %d", s.Name, h.Name, h.RateGbitPerS)
		}
		if h.Shape != "" {
			if _, err := ParseRate(h.Shape); err != nil {
				return fmt.Errorf("testbed spec %q: host %s shape: %w", s.Name, h.Name, err)
			}
		}
	}
	if len(groups) > maxGroups {
		return fmt.Errorf("testbed spec %q: %d groups: at most %d", s.Name, len(groups), maxGroups)
	}
	return nil
}

// groupOrder returns the group names in order of first appearance.
func (s *Spec) groupOrder() []string {
	var order []string
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		if g := h.group(); !seen[g] {
			seen[g] = true
			order = append(order, g)
		}
	}
	return order
}

var rateRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(bit|kbit|mbit|gbit|tbit)$`)

// ParseRate parses a tc rate such as "100mbit" or "2.5gbit" into bits per
// second. Only the decimal bit units tc accepts are allowed, so the value
// handed to tc means what the user wrote.
func ParseRate(s string) (int64, error) {
	m := rateRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("rate %q: want a number and one of bit, kbit, mbit, gbit, tbit (e.g. 100mbit)", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	mult := map[string]float64{"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}[m[2]]
	bits := int64(v * mult)
	if bits < 8000 {
		return 0, fmt.Errorf("rate %q: below 8kbit is too slow for sshd to work", s)
	}
	return bits, nil
}

// rdmaRateText is what a real HCA shows in ports/N/rate for a speed.
func rdmaRateText(gbit int) string {
	switch gbit {
	case 400:
		return "400 Gb/sec (4X NDR)"
	case 200:
		return "200 Gb/sec (4X HDR)"
	case 100:
		return "100 Gb/sec (4X EDR)"
	case 56:
		return "56 Gb/sec (4X FDR)"
	case 40:
		return "40 Gb/sec (4X QDR)"
	case 25:
		return "25 Gb/sec (1X EDR)"
	default:
		return fmt.Sprintf("%d Gb/sec (4X)", gbit)
	}
}
