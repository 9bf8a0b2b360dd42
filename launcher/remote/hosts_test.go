package remote

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseHostTarget(t *testing.T) {
	cases := []struct {
		in      string
		want    HostTarget
		wantErr string
	}{
		{"node1", HostTarget{Name: "node1"}, ""},
		{"root@node1", HostTarget{Name: "node1", User: "root"}, ""},
		{"node1:2222", HostTarget{Name: "node1", Port: 2222}, ""},
		{"admin@10.0.0.1:22", HostTarget{Name: "10.0.0.1", User: "admin", Port: 22}, ""},
		{"[fe80::1]:2200", HostTarget{Name: "fe80::1", Port: 2200}, ""},
		{"fe80::1", HostTarget{Name: "fe80::1"}, ""},
		{"u@[::1]", HostTarget{Name: "::1", User: "u"}, ""},
		{"node1:0", HostTarget{}, "port \"0\""},
		{"node1:ssh", HostTarget{}, "port \"ssh\""},
		{"@node1", HostTarget{}, "empty user"},
		{"root@", HostTarget{}, "empty host"},
		{"[::1", HostTarget{}, "unclosed"},
		{"node1;rm", HostTarget{}, `contains ';' at byte 5`},
		{"[::1]:2222", HostTarget{Name: "::1", Port: 2222}, ""},
		{"user@@host", HostTarget{}, `host "user@@host": contains '@'`},
		{"host:", HostTarget{}, `port ""`},
		{"-oProxyCommand=x", HostTarget{}, "starts with '-'"},
		{"-l@h", HostTarget{}, "starts with '-'"},
		{"host$(id)", HostTarget{}, `contains '$'`},
		{"1.2.3.4; id", HostTarget{}, `contains ';'`},
		{"w\x01", HostTarget{}, `contains '\x01'`},
		{"[node1]:22", HostTarget{}, "IPv6 addresses only"},
		{"a..b", HostTarget{}, "empty label"},
	}
	for _, c := range cases {
		got, err := ParseHostTarget(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseHostTarget(%q) error = %v, want it to mention %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseHostTarget(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if back, err := ParseHostTarget(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q via %q = %+v, %v", c.in, got.String(), back, err)
		}
	}
}

func TestParseHostList(t *testing.T) {
	got, err := ParseHostList("root@node[01-03]:2222,gpu7")
	if err != nil {
		t.Fatal(err)
	}
	want := []HostSpec{
		{HostTarget: HostTarget{Name: "node01", User: "root", Port: 2222}},
		{HostTarget: HostTarget{Name: "node02", User: "root", Port: 2222}},
		{HostTarget: HostTarget{Name: "node03", User: "root", Port: 2222}},
		{HostTarget: HostTarget{Name: "gpu7"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, bad := range []string{"node[1-2],node2", "node[1-", "", "n1,N1"} {
		if _, err := ParseHostList(bad); err == nil {
			t.Errorf("ParseHostList(%q) succeeded, want an error", bad)
		}
	}
}

func TestReadHostfile(t *testing.T) {
	cases := []struct {
		file    string
		want    []HostSpec
		wantErr string
	}{
		{"testdata/hostfile_deepspeed", []HostSpec{
			{HostTarget{Name: "worker-1"}, 8},
			{HostTarget{Name: "worker-2"}, 8},
			{HostTarget{Name: "worker-3", User: "admin", Port: 2222}, 4},
		}, ""},
		{"testdata/hostfile_plain", []HostSpec{
			{HostTarget: HostTarget{Name: "node01"}},
			{HostTarget: HostTarget{Name: "node02"}},
			{HostTarget: HostTarget{Name: "node03", User: "root", Port: 22}},
		}, ""},
		{"testdata/hostfile_duplicate", nil, "hostfile testdata/hostfile_duplicate:3: duplicate host worker-1 (first on line 1)"},
		{"testdata/hostfile_spaced_slots", nil, `hostfile testdata/hostfile_spaced_slots:1: bad entry "worker-1 slots = 4": want "host slots=N" (no spaces around '=')`},
		{"testdata/hostfile_bad_entry", nil, `bad entry "worker-1 gpus=4"`},
		{"testdata/hostfile_empty", nil, "hostfile testdata/hostfile_empty is empty"},
		{"testdata/no_such_hostfile", nil, "no such file"},
	}
	for _, c := range cases {
		got, err := ReadHostfile(c.file)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error = %v, want %q", c.file, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %+v, %v\nwant %+v", c.file, got, err, c.want)
		}
	}
}

func TestResolveHosts(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "SLURM_JOB_NODELIST" {
				return v
			}
			return ""
		}
	}
	cases := []struct {
		name    string
		src     HostSources
		want    []string
		wantErr string
	}{
		{"flag", HostSources{Hosts: "a[1-2]", Getenv: env("x[1-9]")}, []string{"a1", "a2"}, ""},
		{"hostfile", HostSources{Hostfile: "testdata/hostfile_plain", Getenv: env("x1")}, []string{"node01", "node02", "node03"}, ""},
		{"slurm", HostSources{Getenv: env("gpu-[08-10]")}, []string{"gpu-08", "gpu-09", "gpu-10"}, ""},
		{"both", HostSources{Hosts: "a", Hostfile: "f"}, nil, "not both"},
		{"none", HostSources{Getenv: env("")}, nil, "no hosts"},
		{"bad slurm", HostSources{Getenv: env("gpu[1-")}, nil, "SLURM_JOB_NODELIST"},
	}
	for _, c := range cases {
		got, err := ResolveHosts(c.src)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: error = %v, want %q", c.name, err, c.wantErr)
			}
			continue
		}
		var names []string
		for _, h := range got {
			names = append(names, h.Name)
		}
		if err != nil || !reflect.DeepEqual(names, c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.name, names, err, c.want)
		}
	}
}

// Hostile hostfiles fail on the bad line with its reason, and memory is
// never sized by a number in the file.
func TestParseHostfileLimits(t *testing.T) {
	cases := []struct{ name, in, wantErr string }{
		{"huge slots", "w1 slots=99999999\n", `hostfile h:1: bad entry "w1 slots=99999999": slots=99999999: want a number from 1 to 64 (GPUs per host)`},
		{"zero slots", "w1 slots=0\n", "want a number from 1 to 64"},
		{"control byte", "w\x01 slots=8\n", `hostfile h:1: bad entry "w\x01 slots=8": host "w\x01": contains '\x01' at byte 1`},
		{"shell syntax", "w1;id slots=8\n", `contains ';'`},
		{"ssh option", "-oProxyCommand=x\n", "starts with '-'"},
		{"long line", strings.Repeat("a", 5000) + "\n", "a line longer than 4096 bytes"},
		{"too many hosts", manyHosts(16385), "hostfile h:16385: more than 16384 hosts"},
		// Issue 31: a key given twice was read as its first value, and
		// host names differing only in case were two hosts.
		{"slots twice", "n1 slots=2 slots=4\n", `hostfile h:1: bad entry "n1 slots=2 slots=4": slots is given twice (slots=2, slots=4): give it once`},
		{"case-folded duplicate", "n1 slots=2\nN1 slots=2\n", "hostfile h:2: duplicate host N1 (first on line 1 as n1: host names are case-insensitive)"},
	}
	for _, c := range cases {
		_, err := ParseHostfile("h", strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: error = %v, want %q", c.name, err, c.wantErr)
		}
	}
	if hs, err := ParseHostfile("h", strings.NewReader(manyHosts(16384))); err != nil || len(hs) != 16384 {
		t.Errorf("16384 hosts: %d, %v", len(hs), err)
	}
}

func manyHosts(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "h%d slots=8\n", i)
	}
	return b.String()
}
