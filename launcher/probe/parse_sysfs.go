package probe

import (
	"bufio"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var ibRate = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([GMT])b/s(?:ec)?\b`)

// ParseIBRate parses an RDMA port's sysfs rate ("200 Gb/sec (4X HDR)") into
// Gbit/s.
func ParseIBRate(s string) (float64, error) {
	m := ibRate.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("rate %q: want e.g. \"200 Gb/sec (4X HDR)\"", strings.TrimSpace(s))
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	switch m[2] {
	case "M":
		v /= 1000
	case "T":
		v *= 1000
	}
	return v, nil
}

// PortState is a numbered sysfs state such as "4: ACTIVE" or "5: LinkUp".
type PortState struct {
	Code int    // 0 when the file had no number
	Text string // "" when the file had no text
}

// ibStateNames and ibPhysStateNames name the codes the kernel prints
// (include/rdma/ib_verbs.h), for files that hold only the number.
var (
	ibStateNames     = map[int]string{1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
	ibPhysStateNames = map[int]string{1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}
)

// ParsePortState parses "4: ACTIVE"; a bare number or bare text is accepted
// (the number is what matters: fixtures show mlx5 phys_state reading
// "4: ACTIVE" where "5: LinkUp" is usual).
func ParsePortState(s string) (PortState, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return PortState{}, fmt.Errorf("port state: empty")
	}
	num, text, found := strings.Cut(s, ":")
	if !found {
		if n, err := strconv.Atoi(s); err == nil {
			return PortState{Code: n}, nil
		}
		return PortState{Text: s}, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		return PortState{}, fmt.Errorf("port state %q: %q is not a number", s, num)
	}
	return PortState{Code: n, Text: strings.TrimSpace(text)}, nil
}

// Active reports whether an IB port state is ACTIVE (code 4).
func (p PortState) Active() bool {
	return p.Code == 4 || (p.Code == 0 && strings.EqualFold(p.Text, "ACTIVE"))
}

// String names the state, filling the text from the code when missing.
func (p PortState) String() string {
	if p.Text != "" {
		return p.Text
	}
	if n, ok := ibStateNames[p.Code]; ok {
		return n
	}
	return strconv.Itoa(p.Code)
}

// ParseNetSpeed parses /sys/class/net/<if>/speed (Mbit/s) into Gbit/s. The
// file is unreadable (EINVAL) or reads -1 while the link is down: ok is false.
func ParseNetSpeed(s string) (gbit float64, ok bool) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return 0, false
	}
	return float64(n) / 1000, true
}

// Net device types from /sys/class/net/<if>/type (include/uapi/linux/if_arp.h).
const (
	ARPHRDEther      = 1
	ARPHRDInfiniBand = 32
	ARPHRDLoopback   = 772
)

// ParseMemTotal returns MemTotal from /proc/meminfo in bytes.
func ParseMemTotal(meminfo string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(meminfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo MemTotal %q: %w", v, err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo MemTotal %q: unknown unit %q", v, f[1])
		}
		return n * 1024, nil
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal line")
}

// ParseCPUInfoCount counts the "processor" entries of /proc/cpuinfo, the
// fallback when nproc is missing.
func ParseCPUInfoCount(cpuinfo string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(cpuinfo))
	for sc.Scan() {
		if k, _, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return n
}

var ethtoolSpeed = regexp.MustCompile(`(?m)^\s*Speed:\s*([0-9]+)\s*Mb/s`)

// ParseEthtoolSpeed returns the link speed in Gbit/s from `ethtool IF`;
// ok is false for "Speed: Unknown!" (link down).
func ParseEthtoolSpeed(out string) (gbit float64, ok bool) {
	m := ethtoolSpeed.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, false
	}
	return float64(n) / 1000, true
}

// RoCEGID is one populated GID table entry of a RoCE port.
type RoCEGID struct {
	Index int
	Type  string // "RoCE v2" or "IB/RoCE v1"
	GID   string // 0000:0000:0000:0000:0000:ffff:c612:000b
}

// PickRoCEGID chooses the GID index NCCL_IB_GID_INDEX should name: RoCE v2
// with an IPv4-mapped address first (routable, what NCCL's own auto-select
// prefers), then any RoCE v2, then the lowest entry. ok is false with no
// entries.
func PickRoCEGID(gids []RoCEGID) (int, bool) {
	best, bestScore := -1, -1
	for _, g := range gids {
		score := 0
		if strings.EqualFold(g.Type, "RoCE v2") {
			score = 2
			if isIPv4MappedGID(g.GID) {
				score = 3
			}
		}
		if score > bestScore || (score == bestScore && g.Index < best) {
			best, bestScore = g.Index, score
		}
	}
	if best < 0 {
		return 0, false
	}
	return best, true
}

func isIPv4MappedGID(gid string) bool {
	return strings.HasPrefix(strings.ToLower(gid), "0000:0000:0000:0000:0000:ffff:")
}
