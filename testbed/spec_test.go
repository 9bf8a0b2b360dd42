package testbed

import (
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"100mbit", 100e6, ""},
		{"2.5gbit", 2.5e9, ""},
		{"64kbit", 64e3, ""},
		{" 1GBIT ", 1e9, ""},
		{"100", 0, "want a number and one of"},
		{"100mbps", 0, "want a number and one of"},
		{"10bit", 0, "too slow"},
		{"", 0, "want a number"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseRate(%q) error = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		err  string
	}{
		{"ok", Spec{Hosts: []HostSpec{{Name: "a"}, {Name: "b-2", RDMA: RDMARoCE, Group: "g"}}, GroupShape: "100mbit"}, ""},
		{"no hosts", Spec{}, "no hosts"},
		{"dup", Spec{Hosts: []HostSpec{{Name: "a"}, {Name: "a"}}}, "appears twice"},
		{"bad name", Spec{Hosts: []HostSpec{{Name: "A_1"}}}, "lower-case"},
		{"bad rdma", Spec{Hosts: []HostSpec{{Name: "a", RDMA: "ib"}}}, `RDMA "ib"`},
		{"bad shape", Spec{Hosts: []HostSpec{{Name: "a"}}, GroupShape: "fast"}, "group shape"},
		{"state root in /tmp", Spec{Hosts: []HostSpec{{Name: "a"}}, StateRoot: "/tmp/x"}, "outside /tmp"},
		{"relative state root", Spec{Hosts: []HostSpec{{Name: "a"}}, StateRoot: "state"}, "absolute path"},
		{"bad host shape", Spec{Hosts: []HostSpec{{Name: "a", Shape: "1x"}}}, "host a shape"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestRDMARateTextAndGID(t *testing.T) {
	if got := rdmaRateText(200); got != "200 Gb/sec (4X HDR)" {
		t.Errorf("rate 200 = %q", got)
	}
	if got := rdmaRateText(25); got != "25 Gb/sec (1X EDR)" {
		t.Errorf("rate 25 = %q", got)
	}
	if got := ipv4MappedGID("198.18.3.11"); got != "0000:0000:0000:0000:0000:ffff:c612:030b" {
		t.Errorf("gid = %q", got)
	}
}
