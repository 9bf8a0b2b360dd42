package remote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipette-launch/pipette-launch/internal/hostname"
	"github.com/pipette-launch/pipette-launch/internal/limits"
)

// Every hostfile either parses or errs; what parses stays inside the limits
// and every host passes the one host-name rule. Seeds: the real hostfiles
// under testdata.
func FuzzParseHostfile(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/hostfile_*")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("w1 slots=99999999\n")
	f.Add("[::1]:2222 slots=2\nroot@10.0.0.1:22\n")
	f.Add("n1 slots=2 slots=4\nN1 slots=2\n")
	f.Fuzz(func(t *testing.T, data string) {
		hosts, err := ParseHostfile("fuzz", strings.NewReader(data))
		if err != nil {
			return
		}
		for _, line := range strings.Split(data, "\n") {
			if line, _, _ = strings.Cut(line, "#"); strings.Count(line, " slots=") > 1 {
				t.Fatalf("line %q with slots= twice accepted", line)
			}
		}
		if len(hosts) == 0 || len(hosts) > limits.MaxHosts {
			t.Fatalf("%d hosts", len(hosts))
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			// Issue 31: one host (names fold case) is one entry, and a
			// line's slots= is given once.
			if k := h.HostTarget.key(); seen[k] {
				t.Fatalf("host %s accepted twice", h.HostTarget)
			} else {
				seen[k] = true
			}
			if h.Slots < 0 || h.Slots > limits.MaxGPUsPerHost {
				t.Fatalf("slots %d", h.Slots)
			}
			if err := hostname.Check(h.Name); err != nil {
				t.Fatalf("host %q accepted: %v", h.Name, err)
			}
			if back, err := ParseHostTarget(h.HostTarget.String()); err != nil || back != h.HostTarget {
				t.Fatalf("round trip of %+v: %+v, %v", h.HostTarget, back, err)
			}
		}
	})
}
